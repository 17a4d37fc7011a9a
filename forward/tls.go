package forward

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSFiles say how DNS over TLS upstreams are trusted: CoreDNS's
// forward options tls CERT KEY CA and tls_servername.
type TLSFiles struct {
	// ServerName the upstream's certificate must hold, also sent as SNI;
	// empty: the upstream's IP address.
	ServerName string
	// CAFile holds the PEM certificates that may sign the upstream's;
	// empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are a client certificate (PEM), for upstreams
	// that ask for one; both or neither.
	CertFile, KeyFile string
}

// LoadTLS reads the files into a client configuration for upstreams
// (how many: the size of its session cache, so each can resume its
// session). An error names the field and the file.
func LoadTLS(f TLSFiles, upstreams int) (*tls.Config, error) {
	cfg := &tls.Config{
		ServerName: f.ServerName,
		MinVersion: tls.VersionTLS12, // as CoreDNS: nothing older than TLS 1.2 for DoT
		// A new connection to an upstream resumes the session of an
		// earlier one: one round trip and no key exchange to verify.
		ClientSessionCache: tls.NewLRUClientSessionCache(max(upstreams, 1)),
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile: %s holds no PEM certificate", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certFile %s, keyFile %s: %w", f.CertFile, f.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, fmt.Errorf("certFile and keyFile: a client certificate needs both")
	}
	return cfg, nil
}
