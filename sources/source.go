// Package sources is the seam between a replica and what feeds its zones.
// A source describes itself in a Spec: its name, the Kubernetes resources
// it watches, the ClusterRole rules those need, whether a configuration
// enables it, and how it is built from the configuration and the shared
// dependencies. The node starts every enabled source of the registry
// (sources/registry) the same way, so a new source is its own folder, one
// line in the registry and its configuration section.
//
// Sources do not import one another: what several share lives in
// sources/kubeclient (API clients, CRD waits), sources/kubeobj (API
// object conversion), sources/crdsource (the watch of one custom
// resource) and here (the messages between sources).
package sources

import (
	"io/fs"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/metrics"
)

// Spec describes a source.
type Spec struct {
	// Name identifies the source in zone batches, logs and Synced.
	Name string
	// Resources are the Kubernetes resources the source reads; empty for
	// a source that reads no API. A replica with an enabled source that
	// reads the API logs client-go through its own logger.
	Resources []schema.GroupResource
	// RBAC are the ClusterRole rules the source needs. deploy/ grants
	// them (sources/registry's tests check that it does).
	RBAC []Rule
	// Watcher marks the source that watches namespaced kinds for other
	// sources (WatchKinds) and widens its sharded watches when asked
	// (zonemanager.WatchEverything) before its replica leaves. At most one.
	Watcher bool
	// Enabled reports whether cfg runs the source.
	Enabled func(cfg *config.Config) bool
	// Build reads and checks what the source needs from deps, before
	// anything runs: an error stops the configuration from starting. The
	// returned Start makes the source's actor once the zone manager runs.
	Build func(deps Deps) (Start, error)
}

// Rule is a ClusterRole rule, as rbac.authorization.k8s.io/v1's
// PolicyRule names its fields. ("" is the core group.)
type Rule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// ReadOnly are the verbs of a rule on what a source watches.
var ReadOnly = []string{"get", "list", "watch"}

// Deps is what a source is built from.
type Deps struct {
	Config *config.Config
	// Files is where relative file names of the configuration are read.
	Files fs.FS
	// Logger is the process's logger; a source adds its own attributes.
	Logger  *slog.Logger
	Metrics *metrics.All
	// Interest says which namespaces this replica's zones are built
	// from; the manager keeps it current, sharded watches read it.
	Interest *zonemanager.Interest
	// Listing, when set, is told when an informer's list begins (true)
	// and ends (false); it must not block.
	Listing func(began bool)
	// UserAgent is what the source says it is to the API server.
	UserAgent string
}

// Start returns the props of the source's actor.
type Start func(Running) *actor.Props

// Running is what has started before a source: the zone manager, which
// receives its changes, and the sources before it in the registry.
type Running struct {
	Manager *actor.PID
	// Watcher is the source of Spec.Watcher; nil when none runs.
	Watcher *actor.PID
}

// Enabled returns the specs cfg enables, in their order.
func Enabled(specs []Spec, cfg *config.Config) []Spec {
	var on []Spec
	for _, s := range specs {
		if s.Enabled(cfg) {
			on = append(on, s)
		}
	}
	return on
}
