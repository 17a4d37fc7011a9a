// Command shardns is a sharded cluster DNS server for Kubernetes.
//
//	shardns serve [--config FILE]   serve DNS (the embedded demo without --config)
//	shardns serve --corefile FILE [--config BASE]
//	                                serve a CoreDNS Corefile as it is, reloaded on change
//	shardns check --config FILE     validate a configuration, its manifests and zone files
//	shardns convert --corefile FILE print the configuration equivalent to a CoreDNS Corefile
//	shardns credential --secret-key-file FILE
//	                                print the node-local credential derived from the replicas' key
//	shardns version                 print the version
package main

import (
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/corefile"
	"github.com/shardns/shardns/deploy/local"
	"github.com/shardns/shardns/node"
	"github.com/shardns/shardns/sources/manifest"
	"github.com/shardns/shardns/sources/zonefile"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "shardns:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  shardns serve [--config FILE]   serve DNS (the embedded demo cluster without --config)
  shardns serve --corefile FILE [--config BASE]
                                  serve a CoreDNS Corefile as it is, reloaded on change
                                  (--kube-dns-configmap FILE [--cluster-domain D] [--dns-port N]:
                                  a kube-dns ConfigMap)
                                  NodeLocal DNSCache's Corefile: its placeholders are filled as
                                  node-cache fills them [--localip IPS] [--upstreamsvc SVC]
                                  [--cluster-dns ADDR] [--upstream-servers LIST]
  shardns check --config FILE     validate a configuration, its manifests and zone files
                                  (--corefile FILE: a Corefile, as serve would run it)
  shardns ring --http ADDR        show the members and the owners of each zone, from /debug/ring
                                  (served to the replica's own host, and to http.debug)
                                  [--view [--every 2s]]: each member's zones and the handoffs as bars,
                                  redrawn every 2 s on a terminal (printed once otherwise)
  shardns convert --corefile FILE print the configuration equivalent to a CoreDNS Corefile
                                  and its imports [--allow-unmapped] [--expand-env]; - reads standard input
                                  (and node-cache's flags, as serve)
  shardns convert --kube-dns-configmap FILE
                                  the same for a kube-dns ConfigMap (stubDomains, upstreamNameservers,
                                  federations) [--cluster-domain D] [--dns-port N]
  shardns credential --secret-key-file FILE
                                  print the node-local credential derived from the replicas' key
                                  (a node-local process's cluster.credentialFile)
  shardns version                 print the version`

func run(args []string, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("no command\n%s", usage)
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check":
		return check(args[1:])
	case "ring":
		return ring(args[1:])
	case "convert":
		return convert(args[1:], os.Stdin, os.Stdout, stderr)
	case "credential":
		return credential(args[1:], os.Stdout)
	case "version":
		fmt.Println("shardns", node.Version)
		return nil
	case "-h", "--help", "help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// loaded is the configuration serve and check start from.
type loaded struct {
	cfg   *config.Config
	files fs.FS       // the embedded demo's manifests; nil: the OS's
	watch node.Option // reloads on change; nil for the demo
}

// loadConfig reads --corefile (with --config as its base), or --config,
// or the embedded demo when neither is given.
func loadConfig(name string, args []string) (*loaded, error) {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fl.String("config", "", "configuration file (YAML); with --corefile, what a Corefile cannot say "+
		"(mode, cluster, memory, log level and format); empty and without --corefile: the embedded demo")
	core := fl.String("corefile", "", "a CoreDNS Corefile, served as it is (converted in memory, its imports read, reloaded on change)")
	kubeDNS := fl.String("kube-dns-configmap", "", "a kube-dns ConfigMap (manifest or data), served as the Corefile CoreDNS's migration makes of it")
	var kubeDNSOpts corefile.KubeDNSOptions
	kubeDNSFlags(fl, &kubeDNSOpts)
	var nodeCache corefile.NodeCache
	nodeCacheFlags(fl, &nodeCache)
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if fl.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	switch {
	case *core != "" && *kubeDNS != "":
		return nil, fmt.Errorf("%s takes --corefile or --kube-dns-configmap, not both", name)
	case *core != "" || *kubeDNS != "":
		src := corefileSource{path: *core + *kubeDNS, kubeDNS: *kubeDNS != "", kubeDNSOptions: kubeDNSOpts,
			nodeCache: nodeCache, base: *path}
		cfg, err := src.load()
		return &loaded{cfg: cfg, watch: src.option()}, err
	case *path != "":
		cfg, err := config.Load(*path)
		return &loaded{cfg: cfg, watch: node.WithConfigFile(*path)}, err
	}
	data, err := local.Files.ReadFile(local.ConfigFile)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(data)
	return &loaded{cfg: cfg, files: local.Files}, err
}

func serve(args []string, stderr io.Writer) error {
	l, err := loadConfig("serve", args)
	if err != nil {
		return err
	}
	log := newLogger(l.cfg, stderr)
	opts := []node.Option{node.WithFiles(l.files)}
	if l.watch == nil {
		log.Info("no --config or --corefile given: serving the embedded demo cluster")
	} else {
		opts = append(opts, l.watch)
	}
	n, err := node.New(l.cfg, log, opts...)
	if err != nil {
		return err
	}
	// Listen for signals before serving, so a SIGTERM that arrives as soon
	// as the sockets answer still gets the lameduck.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := n.Start(); err != nil {
		n.Stop(0)
		return err
	}
	for s := range sig {
		if s == syscall.SIGHUP {
			n.ReloadNow()
			continue
		}
		log.Info("shutting down", "signal", s.String())
		n.Stop(n.Lameduck())
		return nil
	}
	return nil
}

func check(args []string) error {
	l, err := loadConfig("check", args)
	if err != nil {
		return err
	}
	cfg, files := l.cfg, l.files
	snap, err := manifest.Load(files, cfg.Manifests.Files)
	if err != nil {
		return fmt.Errorf("manifests.files: %w", err)
	}
	zs, reserved := zonefile.FromConfig(cfg)
	zoneFiles, err := zonefile.Load(files, zs, reserved)
	if err != nil {
		return err
	}
	fmt.Printf("configuration OK; manifests hold %d objects, zone files %d zones\n", snap.Len(), zoneFiles.Len())
	return nil
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
