package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/shardns/shardns/internal/testutil"
)

// Unbound is a real Unbound resolver serving local data on loopback: the
// upstream the forwarder talks to.
type Unbound struct {
	Addr    string
	TLSAddr string // DNS over TLS, when started with startUnboundTLS
	cmd     *exec.Cmd
	done    chan struct{}
}

// unboundTLS is the certificate of an Unbound serving DNS over TLS too.
type unboundTLS struct{ certFile, keyFile string }

// StartUnbound runs Debian's Unbound with the local data records (zone
// file lines) under example.test. and 2.0.192.in-addr.arpa.
func StartUnbound(t testing.TB, data ...string) *Unbound {
	t.Helper()
	return startUnboundWith(t, nil, data)
}

// StartUnboundTLS is StartUnbound serving DNS over TLS (RFC 7858) with
// the certificate in certFile and keyFile on a port of its own, tlsAddr.
func StartUnboundTLS(t testing.TB, certFile, keyFile string, data ...string) *Unbound {
	t.Helper()
	return startUnboundWith(t, &unboundTLS{certFile, keyFile}, data)
}

func startUnboundWith(t testing.TB, tls *unboundTLS, data []string) *Unbound {
	t.Helper()
	if _, err := exec.LookPath("unbound"); err != nil {
		t.Fatal("unbound is not installed (scripts/deps.sh installs it)")
	}
	dir := t.TempDir()
	// A port free for UDP when picked may be taken for TCP, or by the
	// time Unbound binds it: an Unbound that exits at once is started
	// again on another port.
	for attempt := 1; ; attempt++ {
		u, err := tryUnbound(t, dir, FreeUDPPort(t), tls, data)
		if err == nil || attempt == 3 {
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		t.Logf("unbound did not start, trying another port: %v", err)
	}
}

// tryUnbound starts Unbound on port and waits until it answers, or
// reports that it exited.
func tryUnbound(t testing.TB, dir string, port int, tls *unboundTLS, data []string) (*Unbound, error) {
	t.Helper()
	var local strings.Builder
	for _, d := range data {
		fmt.Fprintf(&local, "  local-data: %q\n", d)
	}
	tlsAddr := ""
	if tls != nil {
		tlsPort := FreePort(t)
		tlsAddr = fmt.Sprintf("127.0.0.1:%d", tlsPort)
		fmt.Fprintf(&local, "  interface: 127.0.0.1@%d\n  tls-port: %d\n  tls-service-pem: %q\n  tls-service-key: %q\n",
			tlsPort, tlsPort, tls.certFile, tls.keyFile)
	}
	conf := fmt.Sprintf(`server:
  interface: 127.0.0.1@%d
  port: %d
  do-daemonize: no
  chroot: ""
  username: ""
  directory: %q
  pidfile: %q
  logfile: ""
  use-syslog: no
  verbosity: 0
  do-ip6: no
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  local-zone: "example.test." static
  local-data: "example.test. 300 IN SOA ns.example.test. host.example.test. 1 3600 600 86400 60"
  local-zone: "2.0.192.in-addr.arpa." static
  local-data: "2.0.192.in-addr.arpa. 300 IN SOA ns.example.test. host.example.test. 1 3600 600 86400 60"
  local-zone: "cluster.local." static
  local-data: "nope.shop.svc.cluster.local. 300 IN A 6.6.6.6"
%s
remote-control:
  control-enable: no
`, port, port, dir, filepath.Join(dir, "unbound.pid"), local.String())
	path := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unbound-checkconf", path).CombinedOutput(); err != nil {
		t.Fatalf("unbound-checkconf: %v\n%s", err, out)
	}
	u := &Unbound{Addr: fmt.Sprintf("127.0.0.1:%d", port), TLSAddr: tlsAddr, cmd: exec.Command("unbound", "-d", "-c", path), done: make(chan struct{})}
	u.cmd.Stdout, u.cmd.Stderr = os.Stderr, os.Stderr
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { u.cmd.Wait(); close(u.done) }()
	t.Cleanup(u.Stop)
	var exited error
	testutil.Eventually(t, 10*time.Second, func() error {
		select {
		case <-u.done:
			exited = fmt.Errorf("unbound on port %d exited", port)
			return nil
		default:
		}
		_, err := testutil.Exchange(u.Addr, "udp", "example.test.", dns.TypeSOA)
		return err
	})
	return u, exited
}

// Stop stops Unbound and waits for it to exit.
func (u *Unbound) Stop() {
	u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		u.cmd.Process.Kill()
		<-u.done
	}
}
