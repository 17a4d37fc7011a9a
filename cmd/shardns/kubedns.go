package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/shardns/shardns/corefile"
)

// convertKubeDNS prints the shardns configuration equivalent to the
// kube-dns ConfigMap at path (- reads standard input), a manifest or its
// data: it is translated to the Corefile CoreDNS would run in its place,
// which is converted as convert converts a Corefile. Findings go to
// stderr; any setting without an equivalent (a federation) makes it fail
// without printing a configuration unless allowUnmapped.
func convertKubeDNS(path string, opts corefile.KubeDNSOptions, allowUnmapped bool, stdin io.Reader, stdout, stderr io.Writer) error {
	name, src, err := readInput(path, "kube-dns ConfigMap", stdin)
	if err != nil {
		return err
	}
	text, err := corefile.KubeDNSCorefile(src, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Findings name lines of the translated Corefile, not of the
	// ConfigMap; the name says so.
	return printConversion(name+" as Corefile", text, corefile.Options{}, "kube-dns", allowUnmapped, stdout, stderr)
}

// kubeDNSFlags adds the flags that shape the Corefile a kube-dns
// ConfigMap becomes: kube-dns took its domain from a flag, not from the
// ConfigMap.
func kubeDNSFlags(fl *flag.FlagSet, opts *corefile.KubeDNSOptions) {
	fl.StringVar(&opts.ClusterDomain, "cluster-domain", "cluster.local", "with --kube-dns-configmap: the cluster's DNS domain (kube-dns's --domain, kubelet's --cluster-domain)")
	fl.IntVar(&opts.Port, "dns-port", 53, "with --kube-dns-configmap: the port to answer on")
}
