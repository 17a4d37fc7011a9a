package kubenode

// What a run leaves on the host, and its removal.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// removeLeftovers removes everything a run of the node leaves on the
// host, whether it stopped cleanly or was killed: the processes that name
// the node's directories, the containers and their shims, the mounts, the
// network namespaces, kube-proxy's rules, the bridge, the node-local
// DaemonSet's interface (NodeLocalLink) and the directories.
// kubeProxy may be empty when its binary is not known. It logs what it
// cannot remove and goes on.
func removeLeftovers(t testing.TB, kubeProxy string) {
	t.Helper()
	var errs []error
	// The containers' cgroups, found through runc's state, which runc
	// delete removes.
	cgroups := containerCgroups()
	// The servers first (their command lines name the data directory),
	// so that nothing restarts a container or mounts anew while the rest
	// goes.
	killMatching([]string{dataDir()})
	// Then the containers, while their shims live to reap them: runc
	// kills what its state lists (one root per containerd namespace),
	// and whatever is left in their cgroups is killed after. A container
	// outlives a killed shim, so this is needed after a killed run too.
	roots, _ := filepath.Glob(filepath.Join(stateDir, "runc", "*"))
	for _, root := range roots {
		if out, err := exec.Command("runc", "--root", root, "list", "-q").Output(); err == nil {
			for _, id := range strings.Fields(string(out)) {
				if _, err := run("runc", "--root", root, "delete", "--force", id); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	killCgroups(cgroups)
	killMatching([]string{stateDir}) // the shims (they name containerd's socket)
	errs = append(errs, unmountUnder(stateDir, dataDir())...)
	if kubeProxy != "" {
		// Removes kube-proxy's Service rules; it exits non-zero here
		// because it also tries IPVS's ipsets, which need ipset.
		exec.Command(kubeProxy, "--cleanup").Run()
	}
	errs = append(errs, removeKubeChains()...)
	errs = append(errs, removeOurRules()...)
	errs = append(errs, removeCgroups(cgroups)...)
	// The pods' bridge, and the interface of the node-local DaemonSet,
	// which its pods leave on the host when they go.
	for _, link := range []string{bridge, NodeLocalLink} {
		if _, err := net.InterfaceByName(link); err == nil {
			if _, err := run("ip", "link", "del", link); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, restoreTunables()...)
	errs = append(errs, removeImages()...)
	for _, d := range []string{dataDir(), stateDir} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, err := range errs {
		t.Logf("kubenode: cleanup: %v", err)
	}
}

// killMatching SIGKILLs every process whose command line contains one of
// the strings, and waits until they are gone (at most 10s).
func killMatching(subs []string) {
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, s := range subs {
			if bytes.Contains(cmdline, []byte(s)) {
				syscall.Kill(pid, syscall.SIGKILL)
				pids = append(pids, pid)
				break
			}
		}
	}
	waitGone(pids)
}

// waitGone waits until the processes have exited, at most 10s.
func waitGone(pids []int) {
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// zombie reports whether pid has exited and waits for its parent to reap
// it (our own children are reaped by exec.Cmd.Wait).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// unmountUnder detaches every mount below the directories, deepest
// first: containers' root file systems, kubelet's volumes, the pods'
// network namespaces.
func unmountUnder(dirs ...string) []error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []error{err}
	}
	var points []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				points = append(points, mp)
				break
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errs
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeOurRules deletes the FORWARD rules setupNetwork added.
func removeOurRules() []error {
	var errs []error
	for _, ipt := range iptablesCommands() {
		out, err := run(ipt, "-w", "-S", "FORWARD")
		if err != nil {
			continue // a back end without the filter table
		}
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "-A FORWARD ") || !strings.Contains(l, ruleComment) {
				continue
			}
			args := append([]string{"-w", "-D"}, splitRule(strings.TrimPrefix(l, "-A "))...)
			if _, err := run(ipt, args...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// removeKubeChains removes what kube-proxy leaves after its --cleanup
// (KUBE-FIREWALL, KUBE-MARK-MASQ, the canaries): the jumps to KUBE-*
// chains, then the chains, in iptables and ip6tables.
func removeKubeChains() []error {
	var errs []error
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			out, err := exec.Command(ipt, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			var chains []string
			for _, l := range strings.Split(string(out), "\n") {
				f := splitRule(l)
				switch {
				case len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
					chains = append(chains, f[1])
				case len(f) > 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") && strings.Contains(l, " -j KUBE-"):
					if _, err := run(ipt, append([]string{"-w", "-t", table, "-D"}, f[1:]...)...); err != nil {
						errs = append(errs, err)
					}
				}
			}
			for _, c := range chains {
				exec.Command(ipt, "-w", "-t", table, "-F", c).Run()
			}
			for _, c := range chains {
				if _, err := run(ipt, "-w", "-t", table, "-X", c); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errs
}

// splitRule splits a line of iptables -S into arguments: words, or
// double-quoted strings (comments) with \" inside.
func splitRule(l string) []string {
	var args []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(l); i++ {
		ch := l[i]
		switch {
		case quoted && ch == '\\' && i+1 < len(l):
			i++
			cur.WriteByte(l[i])
		case ch == '"':
			quoted, inWord = !quoted, true
		case ch == ' ' && !quoted:
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// containerCgroups lists the cgroups of the node's containers in every
// hierarchy, deepest first. containerd puts them at /k8s.io/<id> (its
// namespace, then the container), so the ids come from runc's state under
// stateDir, which a killed run leaves too.
func containerCgroups() []string {
	ids, _ := filepath.Glob(filepath.Join(stateDir, "runc", "*", "*"))
	var dirs []string
	for _, id := range ids {
		ns, name := filepath.Base(filepath.Dir(id)), filepath.Base(id)
		for _, pattern := range []string{"/sys/fs/cgroup/*/" + ns + "/" + name, "/sys/fs/cgroup/" + ns + "/" + name} {
			found, _ := filepath.Glob(pattern)
			for _, d := range found {
				filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
					if err == nil && e.IsDir() {
						dirs = append(dirs, path)
					}
					return nil
				})
			}
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// killCgroups SIGKILLs every process in the cgroups and waits
// until they are gone (at most 10s).
func killCgroups(dirs []string) {
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
				pids = append(pids, pid)
			}
		}
	}
	waitGone(pids)
}

// removeCgroups removes the containers' cgroups once their processes are
// gone, and their namespace's parent if nothing else is in it (runc
// leaves it).
func removeCgroups(dirs []string) []error {
	var errs []error
	parents := map[string]bool{}
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
		parents[filepath.Dir(d)] = true
	}
	for d := range parents {
		syscall.Rmdir(d) // fails while other containers of that namespace live
	}
	return errs
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// restoreTunables writes back what saveTunables recorded.
func restoreTunables() []error {
	f, err := os.Open(filepath.Join(stateDir, "sysctl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var errs []error
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s: %w", k, err))
		}
	}
	return errs
}

// ImageDomain is the registry domain of the Docker images the node
// builds, and under which a test names the ones it builds to import: a
// run removes those a killed run left.
const ImageDomain = "shardns.test/"

// removeImages removes the tier's Docker images that a killed run left.
// Under the host lock no other run has one: they are built after Start.
func removeImages() []error {
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").Output()
	if err != nil {
		return nil // no Docker: no image either
	}
	var errs []error
	for _, ref := range strings.Fields(string(out)) {
		if strings.HasPrefix(ref, ImageDomain) {
			if _, err := run("docker", "rmi", ref); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}
