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

// Role is what a process on the remote port proved to be, and so what it
// may send there.
type Role uint8

const (
	// RoleUnproven: a plain-text connection (loopback, or an explicitly
	// insecure cluster), where nothing is proven.
	RoleUnproven Role = iota
	// RoleReplica: the peer holds a replica key.
	RoleReplica
	// RoleNodeLocal: the peer holds the node-local credential, derived
	// from a replica key: it may ask, never answer.
	RoleNodeLocal
)

func (r Role) String() string {
	switch r {
	case RoleReplica:
		return "replica"
	case RoleNodeLocal:
		return "nodelocal"
	}
	return "unproven"
}

// Info strings of HKDF-SHA256: each use of a key gets a key of its own,
// and changing one changes what every replica derives from it.
const (
	// replicaTLSInfo is the replicas' remote certificate, unchanged since
	// the remote port first spoke TLS, so that replicas of both releases
	// accept each other during an upgrade.
	replicaTLSInfo = "shardns remote tls v1"
	// nodeLocalKeyInfo derives the node-local credential's key from a
	// replica key.
	nodeLocalKeyInfo = "shardns nodelocal key v1"
	// nodeLocalTLSInfo derives the node-local certificate from the
	// credential's key.
	nodeLocalTLSInfo = "shardns remote tls nodelocal v1"
)

// pins are the public keys a process accepts, by the role each proves.
type pins map[Role][]ed25519.PublicKey

// roleOf is the role a certificate's public key proves.
func (p pins) roleOf(pub ed25519.PublicKey) (Role, bool) {
	for role, keys := range p {
		for _, k := range keys {
			if pub.Equal(k) {
				return role, true
			}
		}
	}
	return RoleUnproven, false
}

// ReplicaTLS returns the TLS settings of a replica's remote port, server
// and client side, from the replica keys. Each key yields an Ed25519 key
// pair (HKDF-SHA256 of the key); a replica presents the pair of keys[0]
// and accepts a peer presenting the pair of any key as a replica, and the
// node-local certificate derived from any key as a node-local process.
// No certificate authority or host name is involved: the peer's public
// key is what is checked, and what it proves decides what it may send.
func ReplicaTLS(keys [][]byte) (*Identity, error) {
	if len(keys) == 0 {
		return nil, errors.New("trust: no key")
	}
	accepted := pins{}
	var own tls.Certificate
	for i, k := range keys {
		priv, err := derive(k, replicaTLSInfo)
		if err != nil {
			return nil, err
		}
		accepted[RoleReplica] = append(accepted[RoleReplica], priv.Public().(ed25519.PublicKey))
		nl, err := derive(deriveCredentialKey(k), nodeLocalTLSInfo)
		if err != nil {
			return nil, err
		}
		accepted[RoleNodeLocal] = append(accepted[RoleNodeLocal], nl.Public().(ed25519.PublicKey))
		if i == 0 {
			if own, err = selfSigned(priv); err != nil {
				return nil, err
			}
		}
	}
	return newIdentity(own, accepted), nil
}

// NodeLocalTLS returns the TLS settings of a node-local process's remote
// port from its credential: it presents the node-local certificate and
// accepts replicas only.
func NodeLocalTLS(c Credential) (*Identity, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	priv, err := derive(c.Key, nodeLocalTLSInfo)
	if err != nil {
		return nil, err
	}
	own, err := selfSigned(priv)
	if err != nil {
		return nil, err
	}
	return newIdentity(own, pins{RoleReplica: c.Replicas}), nil
}

// RoleOf is the role the certificate a TLS peer presented proves;
// RoleUnproven when it presented none this identity accepts.
func (id *Identity) RoleOf(state tls.ConnectionState) Role {
	if id == nil || len(state.PeerCertificates) == 0 {
		return RoleUnproven
	}
	pub, ok := state.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return RoleUnproven
	}
	role, _ := id.accepted.roleOf(pub)
	return role
}

// Identity is a process's TLS settings on the remote port, as a server
// and as a client, and the roles whose certificates it accepts.
type Identity struct {
	Server, Client *tls.Config
	accepted       pins
}

func newIdentity(own tls.Certificate, accepted pins) *Identity {
	server, client := tlsConfigs(own, accepted)
	return &Identity{Server: server, Client: client, accepted: accepted}
}

func tlsConfigs(own tls.Certificate, accepted pins) (server, client *tls.Config) {
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("trust: the peer presented no certificate")
		}
		cert, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return fmt.Errorf("trust: peer certificate: %w", err)
		}
		if pub, ok := cert.PublicKey.(ed25519.PublicKey); ok {
			if _, ok := accepted.roleOf(pub); ok {
				return nil
			}
		}
		return errors.New("trust: the peer's certificate is not derived from a key of this cluster")
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
	return server, client
}

func derive(key []byte, info string) (ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, key, nil, info, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("trust: deriving a remote key: %w", err)
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
