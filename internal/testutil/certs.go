package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// WriteCert writes a new self-signed certificate for 127.0.0.1 and
// localhost, named commonName, and its key as PEM files in dir, replacing
// earlier ones of the same name. It returns the paths and the certificate.
func WriteCert(t testing.TB, dir, name, commonName string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	tmpl := certTemplate(t, commonName)
	tmpl.KeyUsage |= x509.KeyUsageCertSign
	tmpl.IsCA = true
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	tmpl.DNSNames = []string{"localhost"}
	return writeSigned(t, dir, name, tmpl, nil, nil)
}

// WriteCAAndCert writes a new certificate authority (name-ca.crt) and a
// server certificate it signed for serverName alone, not for any IP
// address (name.crt, name.key), as public DNS over TLS resolvers have
// them. It returns the paths.
func WriteCAAndCert(t testing.TB, dir, name, serverName string) (caFile, certFile, keyFile string) {
	t.Helper()
	ca := certTemplate(t, name+" CA")
	ca.KeyUsage |= x509.KeyUsageCertSign
	ca.IsCA = true
	caFile, caKeyFile, caCert := writeSigned(t, dir, name+"-ca", ca, nil, nil)
	caKey := readKey(t, caKeyFile)
	leaf := certTemplate(t, serverName)
	leaf.DNSNames = []string{serverName}
	certFile, keyFile, _ = writeSigned(t, dir, name, leaf, caCert, caKey)
	return caFile, certFile, keyFile
}

func certTemplate(t testing.TB, commonName string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
}

// writeSigned makes a key and tmpl's certificate, signed by parent
// (nil: by itself), and writes both as name.crt and name.key.
func writeSigned(t testing.TB, dir, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeAtomically(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	writeAtomically(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

func readKey(t testing.TB, keyFile string) *ecdsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", keyFile)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return key.(*ecdsa.PrivateKey)
}

// writeAtomically replaces path by renaming a complete file over it, as
// certificate renewals and Kubernetes Secret volumes do.
func writeAtomically(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
