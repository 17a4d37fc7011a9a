package node

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"time"

	"github.com/shardns/shardns/actors/zones"
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
		if httpL, err = net.Listen("tcp", cfg.HTTP.Listen); err != nil {
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
		n.system.Root.Send(next.manager, &zones.RingChanged{Ring: n.ring.Load()})
	}
	n.cfg = cfg
	if cfg.HTTP.Pprof {
		sampleHeap(true) // before the handler serves profiles (see sampleHeap)
	}
	n.pprof.Store(cfg.HTTP.Pprof)
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

// watchConfig reloads the node when its config file changes. An invalid
// file is logged once and the running configuration keeps serving. A
// file modified less than a poll ago is taken once the next poll finds
// it unchanged (SIGHUP takes it at once): written in place, it is empty
// or cut short for a moment, and an empty file is a valid configuration,
// the defaults.
func (n *Node) watchConfig(last []byte) {
	lastErr := ""
	t := time.NewTicker(configPollInterval)
	defer t.Stop()
	var settling fsutil.Settling
	for {
		asked := false
		select {
		case <-n.stopWatch:
			return
		case <-n.reloadNow:
			asked = true
		case <-t.C:
		}
		data, err := os.ReadFile(n.cfgPath)
		if err != nil || bytes.Equal(data, last) {
			continue
		}
		if st, err := os.Stat(n.cfgPath); err != nil || !asked && !settling.Ready(st, configPollInterval) {
			continue
		}
		cfg, err := config.Load(n.cfgPath)
		if err == nil {
			err = n.Reload(cfg)
		}
		if err != nil {
			if err.Error() != lastErr {
				n.log.Error("configuration change rejected; the running configuration keeps serving", "err", err)
			}
			lastErr = err.Error()
			continue
		}
		last, lastErr = data, ""
	}
}

// ReloadNow asks the config watcher to check the file at once (SIGHUP).
func (n *Node) ReloadNow() {
	select {
	case n.reloadNow <- struct{}{}:
	default:
	}
}
