package harness

import (
	"crypto/rand"
	"encoding/base64"
	"os/exec"
	"testing"

	"github.com/shardns/shardns/cluster/trust"
)

// NodeLocalCredential makes a replica key and the node-local credential
// derived from it, as `shardns credential` gives it.
func NodeLocalCredential(t testing.TB) KeyedCredential {
	t.Helper()
	dir := t.TempDir()
	key := make([]byte, 32)
	rand.Read(key)
	keyFile := WriteIn(t, dir, "gossip.key", []byte(base64.StdEncoding.EncodeToString(key)+"\n"))
	out, err := exec.Command(Bin, "credential", "--secret-key-file", keyFile).Output()
	if err != nil {
		t.Fatalf("shardns credential: %v", err)
	}
	cred, err := trust.ParseCredential(out)
	if err != nil {
		t.Fatal(err)
	}
	return KeyedCredential{Credential: cred, KeyFile: keyFile, CredFile: WriteIn(t, dir, "nodelocal.credential", out)}
}

// KeyedCredential is a node-local credential and the replica key file it
// was derived from.
type KeyedCredential struct {
	trust.Credential
	KeyFile  string
	CredFile string // the credential as `shardns credential` wrote it
}
