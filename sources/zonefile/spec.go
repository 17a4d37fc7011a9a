package zonefile

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources"
)

// Spec runs the source when files.zones names a zone. A zone file that
// does not read or parse stops the configuration from starting.
var Spec = sources.Spec{
	Name:    SourceName,
	Enabled: func(cfg *config.Config) bool { return len(cfg.Files.Zones) > 0 },
	Build: func(d sources.Deps) (sources.Start, error) {
		zs, reserved := FromConfig(d.Config)
		initial, err := Load(d.Files, zs, reserved)
		if err != nil {
			return nil, err
		}
		return func(r sources.Running) *actor.Props {
			return NewProps(Config{FS: d.Files, Interval: d.Config.Files.Interval.D(), Manager: r.Manager,
				Logger: d.Logger.With("source", SourceName)}, initial)
		}, nil
	},
}
