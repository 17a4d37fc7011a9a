package trust

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// Credential is what a node-local process holds: a key of its own, from
// which it derives the certificate it presents on the remote port, and
// the replicas' public keys, by which it knows a replica. It is derived
// from the replica keys (NodeLocalCredential), which it does not contain
// and from which it cannot be reversed: holding it lets a process ask the
// replicas what any client may ask them over DNS, never answer a replica,
// own a zone, or join the gossip ring.
type Credential struct {
	// Key seeds the node-local certificate: 32 bytes.
	Key []byte
	// Replicas are the public keys of the replicas' certificates, one per
	// replica key (several during a key rotation).
	Replicas []ed25519.PublicKey
}

// credentialFile is a Credential as stored: YAML (or JSON) with base64
// values, in a file or a Secret's "credential".
type credentialFile struct {
	Kind     string   `json:"kind"`
	Key      []byte   `json:"key"`
	Replicas [][]byte `json:"replicas"`
}

// credentialKind names the format, so that a file meant for something
// else is not read as a credential.
const credentialKind = "shardns-nodelocal-credential/v1"

// NodeLocalCredential derives the node-local credential from the replica
// keys: the key from keys[0], which replicas accept from a node-local
// process, and the public key of each key's replica certificate. Every
// replica derives the same credential from the same keys.
func NodeLocalCredential(keys [][]byte) (Credential, error) {
	if len(keys) == 0 {
		return Credential{}, errors.New("trust: no replica key to derive the node-local credential from")
	}
	c := Credential{Key: deriveCredentialKey(keys[0])}
	for _, k := range keys {
		priv, err := derive(k, replicaTLSInfo)
		if err != nil {
			return Credential{}, err
		}
		c.Replicas = append(c.Replicas, priv.Public().(ed25519.PublicKey))
	}
	return c, nil
}

// deriveCredentialKey is the node-local key of one replica key. hkdf.Key
// fails only for lengths SHA-256 cannot produce; 32 is not one.
func deriveCredentialKey(replicaKey []byte) []byte {
	k, err := hkdf.Key(sha256.New, replicaKey, nil, nodeLocalKeyInfo, 32)
	if err != nil {
		panic("trust: hkdf of 32 bytes: " + err.Error())
	}
	return k
}

// Marshal encodes c for a file or a Secret.
func (c Credential) Marshal() []byte {
	f := credentialFile{Kind: credentialKind, Key: c.Key}
	for _, r := range c.Replicas {
		f.Replicas = append(f.Replicas, r)
	}
	b, err := json.Marshal(f)
	if err != nil {
		panic("trust: encoding a credential: " + err.Error())
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		panic("trust: encoding a credential: " + err.Error())
	}
	return y
}

// ParseCredential decodes what Marshal wrote.
func ParseCredential(b []byte) (Credential, error) {
	var f credentialFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return Credential{}, fmt.Errorf("node-local credential: %w", err)
	}
	if f.Kind != credentialKind {
		return Credential{}, fmt.Errorf("node-local credential: kind %q, want %q (made by `shardns credential`)", f.Kind, credentialKind)
	}
	c := Credential{Key: f.Key}
	for _, r := range f.Replicas {
		c.Replicas = append(c.Replicas, ed25519.PublicKey(r))
	}
	if err := c.check(); err != nil {
		return Credential{}, err
	}
	return c, nil
}

// Same reports whether c and o hold the same keys.
func (c Credential) Same(o Credential) bool {
	if string(c.Key) != string(o.Key) || len(c.Replicas) != len(o.Replicas) {
		return false
	}
	for i := range c.Replicas {
		if !c.Replicas[i].Equal(o.Replicas[i]) {
			return false
		}
	}
	return true
}

func (c Credential) check() error {
	if len(c.Key) != 32 {
		return fmt.Errorf("node-local credential: key of %d bytes, want 32", len(c.Key))
	}
	if len(c.Replicas) == 0 {
		return errors.New("node-local credential: no replica public key")
	}
	for i, r := range c.Replicas {
		if len(r) != ed25519.PublicKeySize {
			return fmt.Errorf("node-local credential: replicas[%d] is %d bytes, want %d", i, len(r), ed25519.PublicKeySize)
		}
	}
	return nil
}
