package manifest

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources"
)

// Spec runs the source when manifests.files names a file. A file that
// does not read or parse stops the configuration from starting.
var Spec = sources.Spec{
	Name:    SourceName,
	Enabled: func(cfg *config.Config) bool { return len(cfg.Manifests.Files) > 0 },
	Build: func(d sources.Deps) (sources.Start, error) {
		files := d.Config.Manifests.Files
		initial, err := Load(d.Files, files)
		if err != nil {
			return nil, fmt.Errorf("manifests.files: %w", err)
		}
		return func(r sources.Running) *actor.Props {
			return NewProps(Config{Files: files, FS: d.Files, Interval: d.Config.Manifests.Interval.D(),
				Manager: r.Manager, Logger: d.Logger}, initial)
		}, nil
	},
}
