package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
)

// credential prints the node-local credential derived from the replicas'
// key file: what cluster.credentialFile of a node-local process holds
// outside Kubernetes (in Kubernetes the replicas write it into
// cluster.nodeLocalSecret themselves).
func credential(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("credential", flag.ContinueOnError)
	keyFile := fl.String("secret-key-file", "", "the replicas' key file (their cluster.secretKeyFile)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	if *keyFile == "" {
		return fmt.Errorf("credential needs --secret-key-file")
	}
	keys, err := membership.ReadSecretKeys(*keyFile)
	if err != nil {
		return fmt.Errorf("--secret-key-file: %w", err)
	}
	c, err := trust.NodeLocalCredential(keys)
	if err != nil {
		return err
	}
	_, err = stdout.Write(c.Marshal())
	return err
}
