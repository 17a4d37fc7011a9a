package listeners

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// certCheckInterval is how often, at most, a handshake looks at the
// certificate files for a change: a stat of two files per second, not per
// handshake, and a rotated certificate serves within a second.
const certCheckInterval = time.Second

// Certificate is a TLS certificate and key read from PEM files and read
// again when either file changes (a renewal, a rotated Kubernetes Secret).
// A pair that does not load keeps the last good one serving; the failure
// is logged and retried at the next check. Safe for concurrent use.
type Certificate struct {
	log     *slog.Logger
	current atomic.Pointer[tls.Certificate]
	next    atomic.Int64 // unix nanoseconds of the next look at the files

	mu                sync.Mutex // one look at the files at a time
	certFile, keyFile string
	stamps            [2]os.FileInfo // of the files current was read from
	lastErr           string
}

// LoadCertificate reads certFile and keyFile; an error names the files.
func LoadCertificate(certFile, keyFile string, log *slog.Logger) (*Certificate, error) {
	c := &Certificate{log: log, certFile: certFile, keyFile: keyFile}
	stamps, err := statPair(certFile, keyFile)
	if err == nil {
		err = c.load(stamps)
	}
	if err != nil {
		return nil, err
	}
	c.next.Store(time.Now().Add(certCheckInterval).UnixNano())
	return c, nil
}

// Files are the certificate and key files served.
func (c *Certificate) Files() (certFile, keyFile string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.certFile, c.keyFile
}

// Replace serves the files and certificate of from from now on: a reload
// that names other files loads them first (an error rejects the reload)
// and then swaps them in without a new socket.
func (c *Certificate) Replace(from *Certificate) {
	from.mu.Lock()
	files, stamps, cert := [2]string{from.certFile, from.keyFile}, from.stamps, from.current.Load()
	from.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.certFile, c.keyFile, c.stamps, c.lastErr = files[0], files[1], stamps, ""
	c.current.Store(cert)
}

// GetCertificate is the tls.Config hook: the current certificate, after a
// look at the files when the last one is older than certCheckInterval.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if now := time.Now(); now.UnixNano() >= c.next.Load() {
		c.refresh(now)
	}
	return c.current.Load(), nil
}

// TLSConfig is a server configuration presenting c; TLS 1.2 at least, as
// RFC 8310 and RFC 8484 recommend.
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12}
}

// refresh reloads the pair when a file changed since it was read.
func (c *Certificate) refresh(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.UnixNano() < c.next.Load() {
		return // another handshake looked meanwhile
	}
	c.next.Store(now.Add(certCheckInterval).UnixNano())
	stamps, err := statPair(c.certFile, c.keyFile)
	if err == nil && sameStamp(stamps[0], c.stamps[0]) && sameStamp(stamps[1], c.stamps[1]) {
		return
	}
	if err == nil {
		err = c.load(stamps)
	}
	if err != nil {
		if err.Error() != c.lastErr {
			c.log.Error("the new TLS certificate does not load; the previous one keeps serving", "err", err)
		}
		c.lastErr = err.Error()
		return
	}
	c.lastErr = ""
	leaf := c.current.Load().Leaf
	c.log.Info("TLS certificate reloaded", "certFile", c.certFile, "subject", leaf.Subject.String(),
		"notAfter", leaf.NotAfter)
}

// load reads the pair; stamps are the files' state seen before reading,
// so a change made during the read is seen at the next check.
func (c *Certificate) load(stamps [2]os.FileInfo) error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("certificate %s with key %s: %w", c.certFile, c.keyFile, err)
	}
	c.current.Store(&cert)
	c.stamps = stamps
	return nil
}

func statPair(certFile, keyFile string) ([2]os.FileInfo, error) {
	var out [2]os.FileInfo
	for i, f := range []string{certFile, keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, err
		}
		out[i] = fi
	}
	return out, nil
}

// sameStamp reports an unchanged file: the same file (a replaced Secret
// volume links to a new one), size and modification time.
func sameStamp(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
