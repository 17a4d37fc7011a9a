package zones

// WithFault returns cfg with zone actors that call fail before they apply
// a batch, with their zone key and the names of the Services and
// EndpointSlices in the batch: how the tests make a zone actor panic.
func WithFault(cfg Config, fail func(key string, names []string)) Config {
	cfg.fault = func(key string, b *zoneApply) {
		var names []string
		for _, c := range b.services {
			names = append(names, c.change.Key.Name)
		}
		fail(key, names)
	}
	return cfg
}

// WithRepacked returns cfg with zone actors that call repacked with
// their zone key each time they built their snapshot again for a repack.
func WithRepacked(cfg Config, repacked func(key string)) Config {
	cfg.repacked = repacked
	return cfg
}

// WithReverseHosts returns cfg with the reverse zones in n hosts.
func WithReverseHosts(cfg Config, n int) Config {
	cfg.reverseHosts = n
	return cfg
}

// Holders is holders: the replicas a gained zone is loaded from.
var Holders = holders
