package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/shardns/shardns/corefile"
)

// convert prints the shardns configuration equivalent to a Corefile and
// the files it imports, or to a kube-dns ConfigMap. Every plugin or
// option without an equivalent is listed on stderr with its file and
// line; unless --allow-unmapped is given, any such line makes the
// command fail without printing a configuration, so a script cannot
// deploy a conversion that silently lost a setting.
func convert(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("convert", flag.ContinueOnError)
	fl.SetOutput(stderr)
	path := fl.String("corefile", "", "the Corefile to convert; - reads standard input (its imports are read from the working directory)")
	kubeDNS := fl.String("kube-dns-configmap", "", "a kube-dns ConfigMap (manifest or data) to convert; - reads standard input")
	allow := fl.Bool("allow-unmapped", false, "print the configuration even when some Corefile lines have no shardns equivalent")
	var kubeDNSOpts corefile.KubeDNSOptions
	kubeDNSFlags(fl, &kubeDNSOpts)
	var nodeCache corefile.NodeCache
	nodeCacheFlags(fl, &nodeCache)
	expandEnv := fl.Bool("expand-env", false, "expand {$NAME} and {%NAME%} from this shell's environment (CoreDNS expands them from its own)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	switch {
	case *path != "" && *kubeDNS != "":
		return fmt.Errorf("convert takes --corefile or --kube-dns-configmap, not both")
	case *kubeDNS != "":
		return convertKubeDNS(*kubeDNS, kubeDNSOpts, *allow, stdin, stdout, stderr)
	case *path == "":
		return fmt.Errorf("convert needs --corefile FILE or --kube-dns-configmap FILE (- for standard input)")
	}
	name, src, err := readInput(*path, "Corefile", stdin)
	if err != nil {
		return err
	}
	if src, err = corefile.FillNodeCache(name, src, nodeCache); err != nil {
		return err
	}
	var opts corefile.Options
	if *expandEnv {
		opts.Getenv = os.LookupEnv
	}
	// Relative imports are read from the Corefile's directory, or from
	// the working directory for standard input.
	local := *path
	if local == "-" {
		local = ""
	}
	if err := opts.SetLocalFiles(local); err != nil {
		return err
	}
	return printConversion(name, src, opts, "Corefile", *allow, stdout, stderr)
}

// printConversion parses and converts the Corefile src, prints its
// findings to stderr and the configuration to stdout, or fails when a
// setting of what (a Corefile, a kube-dns ConfigMap) has no equivalent
// and allowUnmapped is false.
func printConversion(name string, src []byte, opts corefile.Options, what string, allowUnmapped bool, stdout, stderr io.Writer) error {
	cf, err := corefile.Parse(name, src, opts)
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
		settings := "settings have"
		if n == 1 {
			settings = "setting has"
		}
		return fmt.Errorf("%d %s %s no shardns equivalent (listed above); --allow-unmapped prints the configuration without them", n, what, settings)
	}
	out, err := res.YAML()
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// readInput reads path, or standard input for "-", named stdinName
// there (for a Corefile, "Corefile", the key of CoreDNS's ConfigMap).
func readInput(path, stdinName string, stdin io.Reader) (string, []byte, error) {
	if path == "-" {
		src, err := io.ReadAll(stdin)
		return stdinName, src, err
	}
	src, err := os.ReadFile(path)
	return path, src, err
}
