package kubenode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The node pulls nothing: its images are built FROM scratch with Docker
// and imported into its containerd.

// pauseSource is the pod sandbox's process: it waits for SIGTERM, as
// registry.k8s.io/pause does, so a sandbox stops at once.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

// buildNodeImages builds the pause image and the busybox image (Debian's
// static busybox, with glibc's getent and the libraries it loads) in
// Docker, under the node's private names, in a build folder below dir.
func buildNodeImages(dir string) error {
	pause := filepath.Join(dir, "pause")
	if err := os.MkdirAll(pause, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"main.go":    pauseSource,
		"go.mod":     "module pause\n\ngo 1.22\n",
		"Dockerfile": "FROM scratch\nCOPY pause /pause\nENTRYPOINT [\"/pause\"]\n",
	}
	if err := writeFiles(pause, files); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-trimpath", "-o", "pause", ".")
	build.Dir = pause
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building pause: %v: %s", err, out)
	}
	if _, err := run("docker", "build", "-q", "-t", pauseImage, pause); err != nil {
		return err
	}

	bb := filepath.Join(dir, "busybox")
	if err := os.MkdirAll(bb, 0o755); err != nil {
		return err
	}
	dockerfile := []string{"FROM scratch", "COPY busybox /bin/busybox", `RUN ["/bin/busybox", "--install", "-s", "/bin"]`}
	if err := copyFile(busyboxPath, filepath.Join(bb, "busybox")); err != nil {
		return err
	}
	getent, err := exec.LookPath("getent")
	if err != nil {
		return err
	}
	// getent and what ldd says it loads, each at its own path (the
	// loader's path is fixed in the binary). glibc 2.34 and later have
	// the DNS and files lookups built in, so no libnss_* is needed.
	libs, err := sharedLibraries(getent)
	if err != nil {
		return err
	}
	for i, p := range append([]string{getent}, libs...) {
		name := fmt.Sprintf("f%d", i)
		if err := copyFile(p, filepath.Join(bb, name)); err != nil {
			return err
		}
		dockerfile = append(dockerfile, fmt.Sprintf("COPY %s %s", name, p))
	}
	dockerfile = append(dockerfile, "COPY nsswitch.conf /etc/nsswitch.conf")
	files = map[string]string{
		"nsswitch.conf": "hosts: files dns\n",
		"Dockerfile":    strings.Join(dockerfile, "\n") + "\n",
	}
	if err := writeFiles(bb, files); err != nil {
		return err
	}
	_, err = run("docker", "build", "-q", "-t", BusyboxImage, bb)
	return err
}

// sharedLibraries lists the absolute paths ldd prints for bin.
func sharedLibraries(bin string) ([]string, error) {
	out, err := run("ldd", bin)
	if err != nil {
		return nil, err
	}
	var libs []string
	for _, l := range strings.Split(out, "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
				break
			}
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s lists no library:\n%s", bin, out)
	}
	return libs, nil
}

// importImages saves the Docker images and imports them into the node's
// containerd, in the namespace kubelet's pods use.
func importImages(images ...string) error {
	save := exec.Command("docker", append([]string{"save"}, images...)...)
	imp := exec.Command("ctr", "--address", containerdSocket(), "--namespace", "k8s.io", "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	var saveErr, impOut strings.Builder
	save.Stderr = &saveErr
	imp.Stdout, imp.Stderr = &impOut, &impOut
	if err := save.Start(); err != nil {
		return err
	}
	ierr := imp.Run()
	serr := save.Wait()
	if serr != nil {
		return fmt.Errorf("docker save %s: %v: %s", strings.Join(images, " "), serr, saveErr.String())
	}
	if ierr != nil {
		return fmt.Errorf("ctr images import: %v: %s", ierr, impOut.String())
	}
	return nil
}

// tagImage gives an imported image another name in the node's containerd.
func tagImage(from, to string) error {
	_, err := run("ctr", "--address", containerdSocket(), "--namespace", "k8s.io", "images", "tag", "--force", normalize(from), normalize(to))
	return err
}

// normalize spells a reference as containerd stores it: docker.io/library/
// for a bare name.
func normalize(ref string) string {
	first, _, hasSlash := strings.Cut(ref, "/")
	switch {
	case !hasSlash:
		return "docker.io/library/" + ref
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		return "docker.io/" + ref
	}
	return ref
}

func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the file at src, following symbolic links, keeping its
// mode.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}
