package main

import (
	"fmt"
	"io"
	"os"

	"github.com/shardns/shardns/corefile"
)

// convertKubeDNS prints the shardns configuration equivalent to the
// kube-dns ConfigMap at path (- reads standard input), a manifest or its
// data: it is translated to the Corefile CoreDNS would run in its place,
// which is converted as convert converts a Corefile. Findings go to
// stderr; any setting without an equivalent (a federation) makes it fail
// without printing a configuration unless allowUnmapped.
func convertKubeDNS(path string, allowUnmapped bool, stdin io.Reader, stdout, stderr io.Writer) error {
	name, src, err := readKubeDNSConfigMap(path, stdin)
	if err != nil {
		return err
	}
	text, err := corefile.KubeDNSCorefile(src, corefile.KubeDNSOptions{})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Findings name lines of the translated Corefile, not of the
	// ConfigMap; the name says so.
	return convertKubeDNSCorefile(name+" as Corefile", text, allowUnmapped, stdout, stderr)
}

// convertKubeDNSCorefile does what convert does once it has read a
// Corefile.
func convertKubeDNSCorefile(name string, text []byte, allowUnmapped bool, stdout, stderr io.Writer) error {
	cf, err := corefile.Parse(name, text, corefile.Options{})
	if err != nil {
		return err
	}
	res, err := corefile.Convert(cf)
	if err != nil {
		return err
	}
	for _, f := range res.Findings {
		fmt.Fprintln(stderr, f.Format(name))
	}
	if n := res.Unmapped(); n > 0 && !allowUnmapped {
		what := "settings have"
		if n == 1 {
			what = "setting has"
		}
		return fmt.Errorf("%d kube-dns %s no shardns equivalent (listed above); --allow-unmapped prints the configuration without them", n, what)
	}
	out, err := res.YAML()
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// readKubeDNSConfigMap reads path, or standard input for "-".
func readKubeDNSConfigMap(path string, stdin io.Reader) (string, []byte, error) {
	if path == "-" {
		src, err := io.ReadAll(stdin)
		return "kube-dns ConfigMap", src, err
	}
	src, err := os.ReadFile(path)
	return path, src, err
}
