package trust

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// remoteKeyInfo separates the TLS key from every other use of a gossip
// key; changing it changes every replica's certificate.
const remoteKeyInfo = "shardns remote tls v1"

// RemoteTLS returns the TLS settings of the remote port, server and
// client side, from the gossip keys. Each key yields an Ed25519 key pair
// (HKDF-SHA256 of the key); a replica presents the pair of keys[0] and
// accepts a peer presenting the pair of any key, both ways. So the remote
// port is authenticated and encrypted by exactly what gossip is, and a key
// rotation (see ParseKeys) rotates both. No certificate authority or
// host name is involved: the peer's public key is what is checked.
func RemoteTLS(keys [][]byte) (server, client *tls.Config, err error) {
	if len(keys) == 0 {
		return nil, nil, errors.New("trust: no key")
	}
	var own tls.Certificate
	pins := make([]ed25519.PublicKey, 0, len(keys))
	for i, k := range keys {
		priv, err := derive(k)
		if err != nil {
			return nil, nil, err
		}
		pins = append(pins, priv.Public().(ed25519.PublicKey))
		if i == 0 {
			if own, err = selfSigned(priv); err != nil {
				return nil, nil, err
			}
		}
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("trust: the peer presented no certificate")
		}
		cert, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return fmt.Errorf("trust: peer certificate: %w", err)
		}
		if pub, ok := cert.PublicKey.(ed25519.PublicKey); ok {
			for _, p := range pins {
				if pub.Equal(p) {
					return nil
				}
			}
		}
		return errors.New("trust: the peer's certificate is not derived from a gossip key of this cluster")
	}
	server = &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{own},
		ClientAuth:            tls.RequireAnyClientCert,
		VerifyPeerCertificate: verify,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{own},
		ServerName:   "shardns",
		// The chain is not checked against a CA: verify pins the key.
		InsecureSkipVerify:    true,
		VerifyPeerCertificate: verify,
	}
	return server, client, nil
}

func derive(key []byte) (ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, key, nil, remoteKeyInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("trust: deriving the remote key: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// selfSigned wraps priv in a certificate TLS can present.
func selfSigned(priv ed25519.PrivateKey) (tls.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "shardns"},
		DNSNames:     []string{"shardns"},
		NotBefore:    time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("trust: remote certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}
