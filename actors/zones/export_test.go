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
