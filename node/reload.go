package node

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"time"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/fsutil"
)

// configPollInterval is how often the config file is checked for changes.
const configPollInterval = 2 * time.Second

// readyTimeout bounds how long a reload waits for its new core to sync
// before giving up and keeping the old configuration.
const readyTimeout = 30 * time.Second

// Reload applies cfg without dropping a query. The new core (zones,
// sources, resolver plane) is built beside the old one and swapped in
// once it has synced; listeners whose address is unchanged keep their
// sockets and switch handlers atomically. Any error leaves the old
// configuration serving.
func (n *Node) Reload(cfg *config.Config) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.stopped {
		return fmt.Errorf("node is not running")
	}
	if cfg.Mode != n.cfg.Mode || !reflect.DeepEqual(cfg.Cluster, n.cfg.Cluster) {
		return fmt.Errorf("mode and cluster.* cannot change on reload: restart the process")
	}
	n.memory.loading()
	defer n.memory.release() // both cores were in memory during the swap, or the new one failed
	next, err := newCore(n.system, cfg, n.log, n.files, append(n.dnsAddrs(), cfg.DNS.Listen...), n.metrics, n.sharding(cfg), n.memory)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := waitFor(ctx, next.synced.Load); err != nil {
		next.stop()
		return fmt.Errorf("the new configuration did not sync within %v", readyTimeout)
	}
	changes, err := n.prepareListeners(cfg)
	if err != nil {
		next.stop()
		return err
	}
	var httpL net.Listener
	if cfg.HTTP.Listen != n.cfg.HTTP.Listen && cfg.HTTP.Listen != "" {
		if httpL, err = n.listenHTTP(cfg.HTTP.Listen); err != nil {
			changes.abandon()
			next.stop()
			return fmt.Errorf("http.listen: %w", err)
		}
	}
	var metricsOnly *metricsListeners
	changedMetrics := !n.metricsOnly.same(cfg.HTTP.MetricsListen)
	if changedMetrics {
		if metricsOnly, err = bindMetrics(n.metricsOnly, cfg.HTTP.MetricsListen); err != nil {
			if httpL != nil {
				httpL.Close()
			}
			changes.abandon()
			next.stop()
			return err
		}
	}

	old := n.core.Swap(next)
	if n.cluster != nil && next.manager != nil {
		// A ring change during the build went to the old core only.
		n.system.Root.Send(next.manager, &zonemanager.RingChanged{Ring: n.rings.Live()})
	}
	n.cfg = cfg
	if cfg.HTTP.Pprof {
		sampleHeap(true) // before the handler serves profiles (see sampleHeap)
	}
	n.pprof.Store(cfg.HTTP.Pprof)
	n.setDebugNets(cfg)
	applyMemoryLimit(cfg.Memory, n.log)
	n.applyListeners(changes, next)
	if cfg.HTTP.Listen != n.HTTPAddrConfigured() {
		n.swapHTTP(httpL)
	}
	if changedMetrics {
		n.metricsOnly.closeExcept(metricsOnly)
		n.metricsOnly = metricsOnly
		n.metricsOnly.start(n)
	}
	old.stop()
	n.log.Info("configuration reloaded", "dns", n.dnsAddrs(), "http", n.httpAddr())
	return nil
}

// HTTPAddrConfigured is the http.listen the running server was bound for.
func (n *Node) HTTPAddrConfigured() string { return n.httpConfigured }

func (n *Node) swapHTTP(l net.Listener) {
	if n.http != nil {
		n.http.Close()
	}
	n.http, n.httpL, n.httpConfigured = nil, l, n.cfg.HTTP.Listen
	if l != nil {
		n.startHTTP(l)
	}
}

// watchConfig reloads the node when its configuration changes. An
// invalid change is logged once and the running configuration keeps
// serving. A change is taken once it has settled (src.settled; SIGHUP
// takes it at once): a file written in place is empty or cut short for a
// moment, and an empty file is a valid configuration, the defaults.
func (n *Node) watchConfig(src configSource, last []byte) {
	lastErr := ""
	var rejected []byte // tried again only when asked (SIGHUP)
	t := time.NewTicker(configPollInterval)
	defer t.Stop()
	for {
		asked := false
		select {
		case <-n.stopWatch:
			return
		case <-n.reloadNow:
			asked = true
		case <-t.C:
		}
		data, err := src.read()
		if err != nil || bytes.Equal(data, last) || !asked && bytes.Equal(data, rejected) || !src.settled(data, asked) {
			continue
		}
		cfg, err := src.load()
		if err == nil {
			err = n.Reload(cfg)
		}
		if err != nil {
			n.metrics.ReloadFailed.Inc()
			if err.Error() != lastErr {
				n.log.Error("configuration change rejected; the running configuration keeps serving", "err", err)
			}
			lastErr, rejected = err.Error(), data
			continue
		}
		last, lastErr, rejected = data, "", nil
	}
}

// configSource is what a node's configuration is read from.
type configSource interface {
	// read returns what the configuration is built from, to tell a
	// change.
	read() ([]byte, error)
	// settled reports whether data, read now and changed, may be taken.
	settled(data []byte, asked bool) bool
	// load builds the configuration.
	load() (*config.Config, error)
}

// fileSource is a YAML configuration file (--config).
type fileSource struct {
	path     string
	settling fsutil.Settling
}

func (f *fileSource) read() ([]byte, error) { return os.ReadFile(f.path) }

// settled: a file modified less than a poll ago is taken once the next
// poll finds it unchanged.
func (f *fileSource) settled(_ []byte, asked bool) bool {
	st, err := os.Stat(f.path)
	return err == nil && (asked || f.settling.Ready(st, configPollInterval))
}

func (f *fileSource) load() (*config.Config, error) { return config.Load(f.path) }

// ConfigSource is a configuration read from something else than one
// YAML file, such as a Corefile and the files it imports; the node
// checks it every two seconds and on SIGHUP (ReloadNow).
type ConfigSource struct {
	// Read returns what the configuration is built from (the files'
	// names and contents), to tell a change.
	Read func() ([]byte, error)
	// Load builds the configuration.
	Load func() (*config.Config, error)
}

// WithConfigSource watches src and reloads the node when it changes.
func WithConfigSource(src ConfigSource) Option {
	return func(n *Node) { n.source = &builtSource{ConfigSource: src} }
}

// builtSource takes a change once two polls in a row read it the same:
// its files may be written one after another.
type builtSource struct {
	ConfigSource
	previous []byte
}

func (b *builtSource) read() ([]byte, error) { return b.Read() }

func (b *builtSource) settled(data []byte, asked bool) bool {
	same := bytes.Equal(data, b.previous)
	b.previous = data
	return asked || same
}

func (b *builtSource) load() (*config.Config, error) { return b.Load() }

// ReloadNow asks the config watcher to check the file at once (SIGHUP).
func (n *Node) ReloadNow() {
	select {
	case n.reloadNow <- struct{}{}:
	default:
	}
}
