package functional

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The Corefile of an AKS-style cluster, its custom imports in a folder as
// the coredns-custom ConfigMap mounts them (empty at first), served as it
// is.
const servedCorefile = `.:%d {
    bind 127.0.0.1
    errors
    health 127.0.0.1:%d
    prometheus 127.0.0.1:%d
    hosts {
        10.1.2.3 a.example.internal
        fallthrough
    }
    cache 30
    loop
    reload
    import custom/*.override
}
import custom/*.server
`

// `shardns serve --corefile` runs a Corefile as it is: it answers from
// it, serves /metrics where prometheus puts it, reads files its imports'
// globs match from the moment they appear, keeps the last good
// configuration when an edit has a line with no equivalent, and refuses
// to start on one.
func TestServeCorefile(t *testing.T) {
	dir := t.TempDir()
	custom := filepath.Join(dir, "custom")
	if err := os.Mkdir(custom, 0o755); err != nil {
		t.Fatal(err)
	}
	dnsPort, healthPort, metricsPort := harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)
	path := filepath.Join(dir, "Corefile")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(path, fmt.Sprintf(servedCorefile, dnsPort, healthPort, metricsPort))
	p := harness.Start(t, harness.Options{Args: []string{"--corefile", path}})
	if want := fmt.Sprintf("127.0.0.1:%d", dnsPort); p.Addr != want {
		t.Fatalf("listening on %s, want the Corefile's %s", p.Addr, want)
	}
	if err := harness.AnswerIs(p.Addr, "a.example.internal.", "10.1.2.3"); err != nil {
		t.Fatal(err)
	}
	if code := harness.HTTPStatus(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); code != 200 {
		t.Fatalf("/metrics on the prometheus address: %d", code)
	}
	if code := harness.HTTPStatus(t, fmt.Sprintf("http://127.0.0.1:%d/health", healthPort)); code != 200 {
		t.Fatalf("/health on the health address: %d", code)
	}

	// The coredns-custom ConfigMap gains an override and a server block.
	write(filepath.Join(custom, "names.override"), "rewrite name b.example.internal a.example.internal\n")
	upstream := harness.StartUnbound(t, "x.example.test. 300 IN A 10.9.9.9")
	write(filepath.Join(custom, "stub.server"), fmt.Sprintf("example.test:%d {\n    bind 127.0.0.1\n    forward . %s\n}\n", dnsPort, upstream.Addr))
	testutil.Eventually(t, 15*time.Second, func() error {
		if err := harness.AnswerIs(p.Addr, "b.example.internal.", "10.1.2.3"); err != nil {
			return err
		}
		return harness.AnswerIs(p.Addr, "x.example.test.", "10.9.9.9")
	})

	// A line with no equivalent: rejected and counted (once: the same
	// files are not tried again), the last good configuration keeps
	// serving.
	write(filepath.Join(custom, "broken.override"), "nosuchplugin\n")
	p.Cmd.Process.Signal(syscall.SIGHUP)
	http := fmt.Sprintf("127.0.0.1:%d", healthPort)
	testutil.Eventually(t, 15*time.Second, func() error {
		if n := harness.Scrape(t, http, "shardns_reload_failed_total"); n != 1 {
			return fmt.Errorf("shardns_reload_failed_total = %v, want 1", n)
		}
		return nil
	})
	for _, name := range []string{"a.example.internal.", "b.example.internal."} {
		if err := harness.AnswerIs(p.Addr, name, "10.1.2.3"); err != nil {
			t.Fatalf("after a rejected edit: %v", err)
		}
	}
	// Asked again (SIGHUP), the same files are tried, and counted, again.
	p.Cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 15*time.Second, func() error {
		if n := harness.Scrape(t, http, "shardns_reload_failed_total"); n != 2 {
			return fmt.Errorf("shardns_reload_failed_total = %v after SIGHUP, want 2", n)
		}
		return nil
	})

	// At start, the same line fails with the converter's message.
	out, err := exec.Command(harness.Bin, "serve", "--corefile", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "broken.override:1") || !strings.Contains(string(out), "nosuchplugin") {
		t.Fatalf("serve --corefile with an unmapped line: %v\n%s", err, out)
	}
}
