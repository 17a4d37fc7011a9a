package zonemanager

import "github.com/asynkron/protoactor-go/actor"

// Hooked is a Config and the hooks a test sets on the zone actors of its
// Manager.
type Hooked struct {
	Config
	hooks testHooks
}

// NewHookedManagerProps returns the props of a Manager with the hooks of h.
func NewHookedManagerProps(h Hooked) *actor.Props {
	return newManagerProps(h.Config, h.hooks)
}

// WithFault returns h with zone actors that call fail before they apply
// a batch, with their zone key and the names of the Services and
// EndpointSlices in the batch: how the tests make a zone actor panic.
func WithFault(h Hooked, fail func(key string, names []string)) Hooked {
	h.hooks.fault = func(key string, b *zoneApply) {
		var names []string
		for _, c := range b.services {
			names = append(names, c.change.Key.Name)
		}
		fail(key, names)
	}
	return h
}

// WithRepacked returns h with zone actors that call repacked with
// their zone key each time they built their snapshot again for a repack.
func WithRepacked(h Hooked, repacked func(key string)) Hooked {
	h.hooks.repacked = repacked
	return h
}

// WithReversePools returns h with the reverse zones in n pools.
func WithReversePools(h Hooked, n int) Hooked {
	h.hooks.reversePools = n
	return h
}

// Holders is holders: the replicas a gained zone is loaded from.
var Holders = holders
