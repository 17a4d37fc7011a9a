// Package kubeapi starts a real Kubernetes control plane for integration
// tests — an etcd and a kube-apiserver, each its own process — and gives the
// tests a kubeconfig path and a client-go clientset. Nothing is faked: the
// code under test talks HTTP/2 and TLS to the same apiserver a cluster runs,
// with its validation, IP allocation, watch cache and resourceVersions.
//
// Only the apiserver runs: there is no kube-controller-manager, scheduler or
// kubelet. Whatever a controller would derive must be written by the test
// itself: EndpointSlices of a Service, the "default" ServiceAccount of a new
// namespace (the ServiceAccount admission plugin is disabled, so Pods can
// still be created without one). The namespaces "default", "kube-system",
// "kube-public" and "kube-node-lease" and the "kubernetes" Service in
// "default" (without endpoints) are created by the apiserver itself.
//
// Services get addresses from 10.96.0.0/16 and fd00:10:96::/112, so both
// single-stack and dual-stack Services can be created.
//
// Binaries: etcd is taken from PATH (Debian's etcd-server package), the
// kube-apiserver from $SHARDNS_KUBE_APISERVER if set, else from
// integration/scripts/build-apiserver.sh, which builds it once into a cache
// folder and prints its path.
//
// Start gives a test its own control plane, stopped when the test ends; it
// is the one to use for tests that stop or restart the apiserver, and
// StartWith the one for tests that need the apiserver started differently
// (alpha feature gates). Shared gives all the tests of a test binary one
// control plane, because starting one takes about ten seconds; those tests
// must keep to their own namespaces, and the binary's TestMain must call
// StopShared.
package kubeapi

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/shardns/shardns/internal/testutil"
)

// Timeouts are generous because the tests run on small CI machines next to
// other builds; they bound waits, they are not slept.
const (
	etcdReadyTimeout      = 30 * time.Second
	apiserverReadyTimeout = 90 * time.Second
	// portFreeTimeout bounds the wait for the previous apiserver's port to
	// be bindable again before a restart.
	portFreeTimeout = 30 * time.Second
	// Stopping sends SIGTERM first so that clients see a real shutdown
	// (GOAWAY, closed watches), and SIGKILL only after the grace period.
	apiserverStopGrace = 30 * time.Second
	etcdStopGrace      = 10 * time.Second
	// startAttempts retries a first start whose free port was taken by
	// someone else between our probe and the server's bind.
	startAttempts = 3
	// logTailLines is how much of a server log a failure shows.
	logTailLines = 40
)

// ServiceCIDRs are the Service IP ranges the apiserver allocates from,
// IPv4 first, so a Service's primary family is IPv4 unless asked otherwise.
var ServiceCIDRs = []string{"10.96.0.0/16", "fd00:10:96::/112"}

// ControlPlane is a running etcd and kube-apiserver. Its methods may be
// called from several goroutines.
type ControlPlane struct {
	// Kubeconfig is the path of a kubeconfig file for a cluster admin
	// (group system:masters, bearer token, TLS verification skipped because
	// the apiserver's certificate is self-signed), for code under test that
	// loads its configuration as a user would.
	Kubeconfig string
	// Client is a clientset for the same admin user. It keeps working
	// across RestartAPIServer: it reconnects on the next request.
	Client kubernetes.Interface

	dir          string // logs, etcd data, certificates, credentials
	cfg          Config
	apiserverBin string
	token        string
	etcdURL      string
	apiAddr      string // host:port, fixed for the life of the control plane

	mu        sync.Mutex // guards the fields below, and serialises start/stop
	etcd      *process
	apiserver *process // nil while stopped
}

// Config is how StartWith starts the apiserver.
type Config struct {
	// FeatureGates, if not empty, is passed to kube-apiserver as
	// --feature-gates: comma-separated Name=true|false pairs, such as
	// "ShardedListAndWatch=false". Alpha gates are off by default.
	FeatureGates string
	// ServiceCIDRs, if not empty, replaces ServiceCIDRs as the apiserver's
	// Service IP ranges.
	ServiceCIDRs []string
}

// serviceCIDRs is what --service-cluster-ip-range is given.
func (cfg Config) serviceCIDRs() []string {
	if len(cfg.ServiceCIDRs) > 0 {
		return cfg.ServiceCIDRs
	}
	return ServiceCIDRs
}

// Sharded is what Start and Shared use: the apiserver applies shard
// selectors to lists and watches (alpha in Kubernetes 1.36 and 1.37), so
// replicas in a cluster watch only the namespaces they own.
var Sharded = Config{FeatureGates: "ShardedListAndWatch=true"}

// Unsharded is an apiserver that ignores shard selectors, as one older
// than 1.36 does: replicas fall back to watching every object.
var Unsharded = Config{FeatureGates: "ShardedListAndWatch=false"}

// Start starts etcd and kube-apiserver on free loopback ports, with their
// data, certificates and logs in a temporary directory of t, and stops them
// when t ends. It fails t if they are not ready in time, showing the end of
// the server's log. If t fails later, the end of both logs is logged too.
func Start(t testing.TB) *ControlPlane {
	t.Helper()
	return StartWith(t, Sharded)
}

// StartWith is Start with the apiserver configured by cfg, which it keeps
// across StartAPIServer and RestartAPIServer.
func StartWith(t testing.TB, cfg Config) *ControlPlane {
	t.Helper()
	// TempDir before Cleanup: cleanups run last-in first-out, so the
	// processes are stopped before their directory is removed.
	c := &ControlPlane{dir: t.TempDir(), cfg: cfg}
	booted := false
	t.Cleanup(func() {
		// A failed boot has already shown the log that matters.
		if booted && t.Failed() {
			c.logTails(t)
		}
		c.stop()
	})
	if err := c.boot(); err != nil {
		t.Fatal(err)
	}
	booted = true
	return c
}

// shared is the control plane of Shared. Its mutex is held while the
// control plane starts, so that parallel tests wait for the same one.
var shared struct {
	mu  sync.Mutex
	cp  *ControlPlane
	err error // a failed start is not retried by every later test
}

// Shared returns the test binary's shared control plane, starting it on
// first use. Tests using it must create and use their own namespaces, and
// must not stop or restart its apiserver (use Start for that). It is not
// stopped when a test ends: the binary's TestMain must call StopShared after
// m.Run. Should a test binary die without doing so, etcd and the apiserver
// are still killed with it (on Linux), but their directory remains.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cp == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "kubeapi-shared-")
		if err != nil {
			shared.err = err
		} else {
			c := &ControlPlane{dir: dir, cfg: Sharded}
			if err := c.boot(); err != nil {
				c.stop()
				os.RemoveAll(dir)
				shared.err = err
			} else {
				shared.cp = c
			}
		}
	}
	if shared.err != nil {
		t.Fatal("shared control plane:", shared.err)
	}
	c := shared.cp
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t)
		}
	})
	return c
}

// StopShared stops the shared control plane, if Shared started one, and
// removes its directory. Call it from TestMain after m.Run:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		kubeapi.StopShared()
//		os.Exit(code)
//	}
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cp != nil {
		shared.cp.stop()
		os.RemoveAll(shared.cp.dir)
	}
	shared.cp, shared.err = nil, nil
}

// RESTConfig returns a new client configuration for the admin user, which
// the caller may change, for clients other than Client (dynamic, informers
// with their own rate limits, the code under test).
func (c *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            "https://" + c.apiAddr,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		// Tests create objects in bursts; client-go's default of 5 QPS
		// would make them slow for no benefit.
		QPS:   200,
		Burst: 400,
	}
}

// APIServerURL is the apiserver's address, https://127.0.0.1:port. It
// stays the same across StopAPIServer, StartAPIServer and RestartAPIServer.
func (c *ControlPlane) APIServerURL() string { return "https://" + c.apiAddr }

// EtcdURL is the client URL of the control plane's etcd, for tests that
// write what the API's validation would refuse straight into storage.
func (c *ControlPlane) EtcdURL() string { return c.etcdURL }

// StopAPIServer stops the apiserver, gracefully (SIGTERM) and waiting for
// it to exit, and leaves etcd running: clients then get connection errors,
// as when a cluster's apiserver is down. It does nothing if the apiserver is
// already stopped.
func (c *ControlPlane) StopAPIServer(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apiserver.stop(apiserverStopGrace)
	c.apiserver = nil
}

// StartAPIServer starts the apiserver stopped by StopAPIServer again, on
// the same address, with the same etcd and credentials, and waits until it
// is ready. It fails t if the apiserver is already running or does not
// become ready in time.
func (c *ControlPlane) StartAPIServer(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil {
		t.Fatal("kubeapi: StartAPIServer: the apiserver is already running")
	}
	// The port was ours until the last apiserver exited; wait until the
	// kernel lets it be bound again rather than fail the apiserver's bind.
	if err := waitPortFree(c.apiAddr, portFreeTimeout); err != nil {
		t.Fatal("kubeapi:", err)
	}
	if err := c.startAPIServer(); err != nil {
		t.Fatal(err)
	}
}

// RestartAPIServer stops the apiserver and starts it again on the same
// address with the same etcd, so that objects, resourceVersions and
// credentials survive, and waits until it is ready: clients see their
// connections and watches end and must reconnect, as in a rolling upgrade.
func (c *ControlPlane) RestartAPIServer(t testing.TB) {
	t.Helper()
	c.StopAPIServer(t)
	c.StartAPIServer(t)
}

// RestartAPIServerWith is RestartAPIServer with the apiserver configured
// by cfg from now on: the same objects served with and without an alpha
// feature gate, without creating them twice.
func (c *ControlPlane) RestartAPIServerWith(t testing.TB, cfg Config) {
	t.Helper()
	c.StopAPIServer(t)
	c.mu.Lock()
	c.cfg = cfg
	c.mu.Unlock()
	c.StartAPIServer(t)
}

// boot starts etcd and the apiserver of a new control plane in c.dir. On
// error, whatever was started is left for c.stop.
func (c *ControlPlane) boot() error {
	bin, err := apiserverBinary()
	if err != nil {
		return err
	}
	c.apiserverBin = bin
	if err := c.writeCredentials(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startEtcd(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.apiAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = c.startAPIServer()
		if err == nil {
			break
		}
		if attempt == startAttempts || !errors.Is(err, errPortTaken) {
			return err
		}
	}
	if c.Kubeconfig, err = c.writeKubeconfig(); err != nil {
		return err
	}
	c.Client, err = kubernetes.NewForConfig(c.RESTConfig())
	return err
}

// writeCredentials writes the admin's token file and the service account
// signing key, both required by the apiserver.
func (c *ControlPlane) writeCredentials() error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	c.token = hex.EncodeToString(b)
	// token,user,uid,groups: system:masters passes every RBAC check.
	line := c.token + ",admin,admin,system:masters\n"
	if err := os.WriteFile(c.path("tokens.csv"), []byte(line), 0o600); err != nil {
		return err
	}
	// The apiserver refuses to start without a key to sign and verify
	// service account tokens, even though no test uses one. 2048 bits is
	// the smallest it accepts without complaint.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return os.WriteFile(c.path("sa.key"), pemKey, 0o600)
}

// writeKubeconfig writes the admin kubeconfig. It is written by hand, not
// with clientcmd, because the format is small and stable.
func (c *ControlPlane) writeKubeconfig() (string, error) {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubeapi
  cluster:
    server: https://%s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: kubeapi
  context:
    cluster: kubeapi
    user: admin
current-context: kubeapi
`, c.apiAddr, c.token)
	path := c.path("kubeconfig")
	return path, os.WriteFile(path, []byte(kubeconfig), 0o600)
}

// startEtcd starts etcd and waits until it is healthy. c.mu is held.
func (c *ControlPlane) startEtcd() error {
	for attempt := 1; ; attempt++ {
		client, err := freePort()
		if err != nil {
			return err
		}
		peer, err := freePort()
		if err != nil {
			return err
		}
		c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(client)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
		p, err := startProcess("etcd", c.path("etcd.log"), "etcd",
			"--name=kubeapi",
			// A directory etcd creates itself, with the 0700 it wants.
			"--data-dir="+c.path("etcd"),
			"--listen-client-urls="+c.etcdURL,
			"--advertise-client-urls="+c.etcdURL,
			"--listen-peer-urls="+peerURL,
			"--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=kubeapi="+peerURL,
			// zap: capnslog, 3.4's default, is deprecated and says so.
			"--logger=zap",
			"--log-outputs=stderr",
			// At info, etcd's log is mostly raft chatter, which would
			// crowd the warnings out of a failed test's log tail.
			"--log-level=warn",
		)
		if err != nil {
			return err
		}
		c.etcd = p
		err = p.waitReady(etcdReadyTimeout, func() bool { return HTTPOK(plainHTTP, c.etcdURL+"/health", "") == nil })
		if err == nil {
			return nil
		}
		p.stop(etcdStopGrace)
		if attempt == startAttempts || !errors.Is(err, errPortTaken) {
			return err
		}
	}
}

// startAPIServer starts the apiserver on c.apiAddr and waits until it is
// ready. c.mu is held. On error the apiserver is stopped again.
func (c *ControlPlane) startAPIServer() error {
	host, port, _ := net.SplitHostPort(c.apiAddr)
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + port,
		// The apiserver generates a self-signed certificate here on first
		// start and reuses it after a restart.
		"--cert-dir=" + c.path("certs"),
		"--service-cluster-ip-range=" + strings.Join(c.cfg.serviceCIDRs(), ","),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.path("sa.key"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--token-auth-file=" + c.path("tokens.csv"),
		"--authorization-mode=RBAC",
		// Priority and fairness creates its configuration objects at
		// start and queues requests; tests gain nothing from it.
		"--enable-priority-and-fairness=false",
		// Without a controller-manager no namespace gets its "default"
		// ServiceAccount, and this plugin would then reject every Pod.
		"--disable-admission-plugins=ServiceAccount",
		// The apiserver would publish itself as the endpoint of the
		// "kubernetes" Service, but its address is loopback, which
		// Endpoints reject: it would log that error every ten seconds.
		// (With none, it logs a misleading "Found stale data" once per
		// start instead.)
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if c.cfg.FeatureGates != "" {
		args = append(args, "--feature-gates="+c.cfg.FeatureGates)
	}
	p, err := startProcess("kube-apiserver", c.path("apiserver.log"), c.apiserverBin, args...)
	if err != nil {
		return err
	}
	insecure := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	defer insecure.CloseIdleConnections()
	base := "https://" + c.apiAddr
	err = p.waitReady(apiserverReadyTimeout, func() bool {
		// /readyz covers etcd, the RBAC bootstrap policy and the other
		// post-start hooks; the system namespaces are created by a
		// controller that only starts then, so they are checked too.
		return HTTPOK(insecure, base+"/readyz", c.token) == nil &&
			HTTPOK(insecure, base+"/api/v1/namespaces/default", c.token) == nil &&
			HTTPOK(insecure, base+"/api/v1/namespaces/kube-system", c.token) == nil
	})
	if err != nil {
		p.stop(apiserverStopGrace)
		return err
	}
	c.apiserver = p
	return nil
}

// stop stops the apiserver, then etcd. It is idempotent.
func (c *ControlPlane) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apiserver.stop(apiserverStopGrace)
	c.apiserver = nil
	c.etcd.stop(etcdStopGrace)
	c.etcd = nil
}

// logTails logs the end of both server logs, for a failed test whose
// directory is about to be removed.
func (c *ControlPlane) logTails(t testing.TB) {
	t.Helper()
	for _, name := range []string{"apiserver.log", "etcd.log"} {
		t.Logf("kubeapi: last %d lines of %s:\n%s", logTailLines, name, Tail(c.path(name), logTailLines))
	}
}

func (c *ControlPlane) path(name string) string { return filepath.Join(c.dir, name) }

// apiserverBin caches the binary's path: the build script takes a while
// even when it has nothing to build.
var apiserverBin struct {
	mu   sync.Mutex
	path string
}

// apiserverBinary returns the path of the kube-apiserver binary:
// $SHARDNS_KUBE_APISERVER, or what integration/scripts/build-apiserver.sh
// prints, building it first if needed.
func apiserverBinary() (string, error) {
	if p := os.Getenv("SHARDNS_KUBE_APISERVER"); p != "" {
		return p, nil
	}
	apiserverBin.mu.Lock()
	defer apiserverBin.mu.Unlock()
	if apiserverBin.path != "" {
		return apiserverBin.path, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kubeapi: cannot locate the package source to find build-apiserver.sh")
	}
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "build-apiserver.sh")
	// Test binaries of several packages run in parallel, and the script
	// does not guard against two builds writing the same file.
	unlock, err := LockFile(filepath.Join(os.TempDir(), "shardns-build-apiserver.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr // progress of a first, minutes-long build
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubeapi: %s: %w", script, err)
	}
	path := strings.TrimSpace(string(out))
	if path == "" {
		return "", fmt.Errorf("kubeapi: %s printed no path", script)
	}
	apiserverBin.path = path
	return path, nil
}

// harness.FreePort returns a loopback port that was free a moment ago
// (testutil.FreePort). Another process may still take it before the
// server binds it; the start attempts retry then.
func freePort() (int, error) {
	return testutil.FreePort()
}

// waitPortFree polls until addr can be listened on, or timeout passes.
func waitPortFree(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %s still in use after %v: %w", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// plainHTTP polls etcd; the timeout keeps a hung server from outliving the
// readiness deadline.
var plainHTTP = &http.Client{Timeout: 5 * time.Second}

// HTTPOK returns nil if GET url answers 200, with token as bearer token
// if not empty. The node tier polls its components with it too.
func HTTPOK(client *http.Client, url, token string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
