// Package kubenode brings up a one-node Kubernetes cluster on this host for
// integration tests: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet and kube-proxy, each its own process, with
// containerd running the pods on a bridge of their own and kube-proxy
// routing Services with iptables. Pods run for real: a StatefulSet gets
// pods, kubelet gives them kubeadm's cluster DNS address (ClusterDNS) and
// the ndots:5 search path, and a ClusterIP reaches its endpoints through
// kube-proxy.
//
// Nothing is pulled: the Kubernetes binaries, kube-apiserver included,
// are built from the k8s.io/kubernetes module that integration/nodebin
// pins (integration/scripts/build-node.sh, once, into a cache folder; the
// integration tier's newer kube-apiserver is not used here), containerd,
// runc and the CNI plugins are Debian's (scripts/deps.sh), and the images
// are built FROM scratch with Docker and imported into the node's
// containerd: a pause image, BusyboxImage, and whatever the test imports
// with ImportDockerImage.
//
// The node needs root and a Docker engine; Start skips the test on a host
// without them. It uses fixed names (a bridge, ports below the ephemeral
// range, folders under /run and the temporary directory, iptables rules
// with a comment) so that it can remove what a killed run left behind
// before it starts, and it holds a host-wide lock while it runs. It
// removes everything it made when the test ends, passed or failed.
//
// Traffic stays on the host: the bridge has no masquerade, and pods with
// dnsPolicy: Default (the shardns replicas) get a resolv.conf naming the
// node's resolver on the host's bridge address, which answers every name
// NXDOMAIN, as the root does for the names tests ask.
package kubenode

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/shardns/shardns/integration/kubeapi"
)

// Version is the Kubernetes version the node runs (integration/nodebin's
// go.mod pins it).
const Version = "v1.31.4"

// Bounds of the waits, generous for a 2-core machine that builds and
// tests at the same time; they bound polls, nothing sleeps for them.
const (
	lockTimeout      = 30 * time.Minute
	containerdReady  = 30 * time.Second
	etcdReady        = 30 * time.Second
	apiserverReady   = 120 * time.Second
	nodeReadyTimeout = 180 * time.Second
	stopGrace        = 5 * time.Second
	logTailLines     = 30
)

// Node is a running one-node cluster.
type Node struct {
	// Kubeconfig is the path of an admin kubeconfig (group
	// system:masters, bearer token, TLS verification skipped).
	Kubeconfig string
	// Client is a clientset for the same admin.
	Client kubernetes.Interface

	data  string
	bins  binaries
	token string

	mu       sync.Mutex
	procs    []*proc // in start order
	upstream *upstream
}

// binaries are the paths of the Kubernetes binaries.
type binaries struct {
	apiserver, controllerManager, scheduler, kubelet, kubeProxy string
}

// Start brings up the node and registers its removal with t.Cleanup. It
// skips t when the host cannot run a kubelet, and fails t, with the end of
// the logs that matter, when a part does not come up in time.
func Start(t *testing.T) *Node {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("skipping: a kubelet runs on Linux only")
	}
	if p := hostProblem(); p != "" {
		t.Skip("skipping: this host cannot run a Kubernetes node: " + p)
	}
	if missing := missingTools(); len(missing) > 0 {
		t.Fatalf("kubenode: not installed: %s (scripts/deps.sh, run by make test, installs them)", strings.Join(missing, ", "))
	}
	bins, err := buildBinaries()
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := lockHost(lockTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock) // registered first, so it runs last
	removeLeftovers(t, bins.kubeProxy)
	if used := portsInUse(); len(used) > 0 {
		t.Fatalf("kubenode: ports %s, which the node uses, are taken by another process", strings.Join(used, ", "))
	}
	n := &Node{data: dataDir(), bins: bins}
	t.Cleanup(func() {
		if t.Failed() {
			n.logTails(t)
		}
		n.stop()
		removeLeftovers(t, bins.kubeProxy)
	})
	begin := time.Now()
	if err := n.boot(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubenode: Kubernetes %s node %s ready in %v", Version, nodeName, time.Since(begin).Round(time.Second))
	return n
}

// RESTConfig returns a new client configuration for the admin.
func (n *Node) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            fmt.Sprintf("https://%s:%d", hostIP, apiserverPort),
		BearerToken:     n.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             100,
		Burst:           200,
	}
}

// ImportDockerImage copies a Docker image into the node's containerd,
// named as pods name it (as, e.g. "shardns:latest").
func (n *Node) ImportDockerImage(t testing.TB, image, as string) {
	t.Helper()
	if err := importImages(image); err != nil {
		t.Fatal("kubenode:", err)
	}
	if err := tagImage(image, as); err != nil {
		t.Fatal("kubenode:", err)
	}
}

// TagImage gives an image of the node's containerd another name, as a
// manifest names it (e.g. BusyboxImage as "busybox:1.36", for an
// imagePullPolicy IfNotPresent that then pulls nothing).
func (n *Node) TagImage(t testing.TB, image, as string) {
	t.Helper()
	if err := tagImage(image, as); err != nil {
		t.Fatal("kubenode:", err)
	}
}

// Log returns the end of a component's log (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kube-proxy,
// containerd), for a test's failure message.
func (n *Node) Log(component string, lines int) string {
	return kubeapi.Tail(n.path(component+".log"), lines)
}

func (n *Node) boot() error {
	for _, d := range []string{n.data, stateDir, n.path("cni"), n.path("build")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The mark that what is under our names is ours (hostProblem).
	if err := os.WriteFile(filepath.Join(stateDir, "started"), nil, 0o644); err != nil {
		return err
	}
	if err := saveTunables(); err != nil {
		return err
	}
	if err := n.writeFiles(); err != nil {
		return err
	}
	if err := setupNetwork(); err != nil {
		return fmt.Errorf("kubenode: network: %w", err)
	}
	u, err := startUpstream()
	if err != nil {
		return fmt.Errorf("kubenode: the node's resolver: %w", err)
	}
	n.mu.Lock()
	n.upstream = u
	n.mu.Unlock()
	if err := n.startContainerd(); err != nil {
		return err
	}
	if err := buildNodeImages(n.path("build")); err != nil {
		return fmt.Errorf("kubenode: images: %w", err)
	}
	defer exec.Command("docker", "rmi", pauseImage, BusyboxImage).Run()
	if err := importImages(pauseImage, BusyboxImage); err != nil {
		return fmt.Errorf("kubenode: images: %w", err)
	}
	if err := n.startEtcd(); err != nil {
		return err
	}
	if err := n.startAPIServer(); err != nil {
		return err
	}
	if err := n.startComponents(); err != nil {
		return err
	}
	return n.waitNode()
}

// harness.WriteFiles writes the credentials and the configuration files.
func (n *Node) writeFiles() error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	n.token = hex.EncodeToString(b)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	n.Kubeconfig = n.path("kubeconfig")
	files := map[string]string{
		"tokens.csv":                       n.token + ",admin,admin,system:masters\n",
		"sa.key":                           string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		"kubeconfig":                       kubeconfig(n.token),
		"containerd.toml":                  containerdConfig(n.data),
		"kubelet.yaml":                     kubeletConfig(n.data),
		"resolv.conf":                      nodeResolvConf(),
		"cni/10-shardns-kubenode.conflist": cniConfig(n.data),
	}
	for name, content := range files {
		if err := os.WriteFile(n.path(name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	n.Client, err = kubernetes.NewForConfig(n.RESTConfig())
	return err
}

func (n *Node) start(name, bin string, args ...string) (*proc, error) {
	p, err := startProc(name, n.path(name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	return p, nil
}

// exitedComponent reports a component that has exited, with its log.
func (n *Node) exitedComponent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.procs {
		if done, err := p.exited(); done {
			return fmt.Errorf("kubenode: %s exited (%v); last %d lines of its log:\n%s", p.name, err, logTailLines, kubeapi.Tail(p.log, logTailLines))
		}
	}
	return nil
}

// Check fails t if a component of the node has exited, so that a test's
// failure names the cause rather than a symptom.
func (n *Node) Check(t testing.TB) {
	t.Helper()
	if err := n.exitedComponent(); err != nil {
		t.Fatal(err)
	}
}

// stop stops the components, kubelet first so that it restarts nothing,
// containerd last.
func (n *Node) stop() {
	n.mu.Lock()
	procs, u := n.procs, n.upstream
	n.procs, n.upstream = nil, nil
	n.mu.Unlock()
	u.stop()
	order := []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "containerd"}
	for _, name := range order {
		for _, p := range procs {
			if p.name == name {
				p.stop(stopGrace)
			}
		}
	}
}

func (n *Node) logTails(t testing.TB) {
	t.Helper()
	for _, name := range []string{"containerd", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		t.Logf("kubenode: last %d lines of %s.log:\n%s", logTailLines, name, n.Log(name, logTailLines))
	}
}

func (n *Node) path(name string) string { return filepath.Join(n.data, name) }

// buildBinaries runs integration/scripts/build-node.sh (which builds only
// what the cache folder lacks) under the lock kubeapi takes for the
// apiserver's build, since both build into the same folder. Every binary,
// kube-apiserver included, comes from that script and is of Version; the
// kube-apiserver of build-apiserver.sh and $SHARDNS_KUBE_APISERVER is the
// integration tier's, newer than this node's kubelet, and is not used.
func buildBinaries() (binaries, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return binaries{}, errors.New("kubenode: cannot locate the package source to find the build scripts")
	}
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "build-node.sh")
	unlock, err := kubeapi.LockFile(filepath.Join(os.TempDir(), "shardns-build-apiserver.lock"))
	if err != nil {
		return binaries{}, err
	}
	defer unlock()
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr // progress of a first, minutes-long build
	out, err := cmd.Output()
	if err != nil {
		return binaries{}, fmt.Errorf("kubenode: %s: %w", script, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return binaries{}, fmt.Errorf("kubenode: %s printed no folder", script)
	}
	bin := func(name string) string { return filepath.Join(dir, name+"-"+Version) }
	return binaries{
		apiserver:         bin("kube-apiserver"),
		controllerManager: bin("kube-controller-manager"),
		scheduler:         bin("kube-scheduler"),
		kubelet:           bin("kubelet"),
		kubeProxy:         bin("kube-proxy"),
	}, nil
}
