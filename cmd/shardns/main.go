// Command shardns is a sharded cluster DNS server for Kubernetes.
//
//	shardns serve [--config FILE]   serve DNS (the embedded demo without --config)
//	shardns check --config FILE     validate a configuration and its manifests
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
	"github.com/shardns/shardns/deploy/local"
	"github.com/shardns/shardns/node"
	"github.com/shardns/shardns/sources/manifest"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "shardns:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  shardns serve [--config FILE]   serve DNS (the embedded demo cluster without --config)
  shardns check --config FILE     validate a configuration and its manifests
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
	case "version":
		fmt.Println("shardns", node.Version)
		return nil
	case "-h", "--help", "help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// loadConfig reads --config, or the embedded demo when it is empty. It
// returns the path read ("" for the demo).
func loadConfig(name string, args []string) (*config.Config, fs.FS, string, error) {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fl.String("config", "", "configuration file (YAML); empty serves the embedded demo")
	if err := fl.Parse(args); err != nil {
		return nil, nil, "", err
	}
	if fl.NArg() > 0 {
		return nil, nil, "", fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	if *path == "" {
		data, err := local.Files.ReadFile(local.ConfigFile)
		if err != nil {
			return nil, nil, "", err
		}
		cfg, err := config.Parse(data)
		return cfg, local.Files, "", err
	}
	cfg, err := config.Load(*path)
	return cfg, nil, *path, err
}

func serve(args []string, stderr io.Writer) error {
	cfg, files, path, err := loadConfig("serve", args)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	opts := []node.Option{node.WithFiles(files)}
	if path == "" {
		log.Info("no --config given: serving the embedded demo cluster")
	} else {
		opts = append(opts, node.WithConfigFile(path))
	}
	n, err := node.New(cfg, log, opts...)
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
	cfg, files, _, err := loadConfig("check", args)
	if err != nil {
		return err
	}
	snap, err := manifest.Load(files, cfg.Manifests.Files)
	if err != nil {
		return fmt.Errorf("manifests.files: %w", err)
	}
	fmt.Printf("configuration OK; manifests hold %d objects\n", snap.Len())
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
