package listeners

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

func presented(t *testing.T, c *Certificate) string {
	t.Helper()
	cert, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf.Subject.CommonName
}

// A renewed certificate serves from the next handshakes on; a broken one
// is logged and the last good one keeps serving.
func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := testutil.WriteCert(t, dir, "tls", "first")
	var log testutil.SyncBuffer
	c, err := LoadCertificate(certFile, keyFile, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := presented(t, c); got != "first" {
		t.Fatalf("presents %q", got)
	}
	testutil.WriteCert(t, dir, "tls", "second")
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := presented(t, c); got != "second" {
			return fmt.Errorf("presents %q", got)
		}
		return nil
	})
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		presented(t, c)
		if !strings.Contains(log.String(), "does not load") {
			return fmt.Errorf("no error logged:\n%s", log.String())
		}
		return nil
	})
	if got := presented(t, c); got != "second" {
		t.Fatalf("after a broken renewal presents %q, want the last good one", got)
	}
}

func TestLoadCertificateNamesTheFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, _, _ := testutil.WriteCert(t, dir, "a", "a")
	_, otherKey, _ := testutil.WriteCert(t, dir, "b", "b")
	_, err := LoadCertificate(certFile, otherKey, slog.Default())
	if err == nil || !strings.Contains(err.Error(), certFile) || !strings.Contains(err.Error(), otherKey) {
		t.Fatalf("err = %v, want one naming both files", err)
	}
	if _, err := LoadCertificate(dir+"/missing.crt", otherKey, slog.Default()); err == nil || !strings.Contains(err.Error(), "missing.crt") {
		t.Fatalf("err = %v", err)
	}
}
