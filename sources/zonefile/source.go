package zonefile

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/fsutil"
	"github.com/shardns/shardns/internal/ticker"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// SourceName identifies this source in zone batches, logs and readiness.
const SourceName = "files"

// Config configures the zone file source.
type Config struct {
	FS       fs.FS         // where files are read; nil reads the OS file system
	Interval time.Duration // how often files are checked for changes
	Manager  *actor.PID    // receives the zones
	Logger   *slog.Logger
}

// Source is the actor that serves the zone files and re-reads them when
// they change.
type Source struct {
	cfg     Config
	served  *Snapshot
	cancel  func()
	lastErr map[*file]string // the last reload error of each file, logged once until it changes
}

type tick struct{}

// NewProps returns the props of a Source that starts from initial, the
// result of Load at start-up.
func NewProps(cfg Config, initial *Snapshot) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Source{cfg: cfg, served: initial, lastErr: map[*file]string{}}
	})
}

// Receive sends the zones, then reloads a file on every tick that finds
// it changed.
func (s *Source) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
	case *tick:
		s.onTick(ctx)
	case *zonemanager.Replay:
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: s.replay(), Replay: msg.ID})
		ctx.Send(s.cfg.Manager, &zonemanager.ReplayDone{Source: SourceName, ID: msg.ID})
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
		}
	}
}

func (s *Source) onStarted(ctx actor.Context) {
	changes := make([]model.Change, 0, len(s.served.initial))
	for _, z := range s.served.initial {
		changes = append(changes, change(z))
		s.cfg.Logger.Info("zone file loaded", "zone", z.Origin, "file", z.File, "serial", z.Serial, "records", len(z.Records))
	}
	s.served.initial = nil // the zones hold the records; the source keeps the bytes
	ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes})
	ctx.Send(s.cfg.Manager, &zonemanager.Synced{Source: SourceName, From: ctx.Self()})
	s.cancel = ticker.Every(ctx.ActorSystem(), ctx.Self(), s.cfg.Interval, &tick{})
}

func change(z *zone.FileZone) model.Change {
	return model.Change{Key: model.Key{Kind: model.KindZoneFile, Name: z.Origin}, Object: z}
}

// replay parses the last good version of every file again, for a replica
// that gained zones.
func (s *Source) replay() []model.Change {
	var out []model.Change
	for _, f := range s.served.files {
		z, err := Parse(f.cfg.File, f.origin, f.data, f.cfg.TransferTo)
		if err != nil { // it parsed before; nothing but a bug gets here
			s.cfg.Logger.Error("zone file replay failed", "zone", f.origin, "file", f.cfg.File, "err", err)
			continue
		}
		out = append(out, change(z))
	}
	return out
}

func (s *Source) onTick(ctx actor.Context) {
	var changes []model.Change
	for _, f := range s.served.files {
		z, err := s.reload(f)
		if err != nil {
			if err.Error() != s.lastErr[f] { // a broken version is reported once
				s.cfg.Logger.Error("zone file reload failed; still serving the last good version",
					"zone", f.origin, "file", f.cfg.File, "serial", f.serial, "err", err)
			}
			s.lastErr[f] = err.Error()
			continue
		}
		delete(s.lastErr, f)
		if z != nil {
			changes = append(changes, change(z))
		}
	}
	if len(changes) > 0 {
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes})
	}
}

// reload returns the new zone of f when its file changed and parses, nil
// when it did not change, and an error when it cannot be served.
func (s *Source) reload(f *file) (*zone.FileZone, error) {
	st, err := fsutil.Stat(s.cfg.FS, f.cfg.File)
	if err != nil {
		return nil, err
	}
	if st.ModTime().Equal(f.mod) && st.Size() == f.size || !f.settling.Ready(st, s.cfg.Interval) {
		return nil, nil
	}
	data, err := fsutil.ReadFile(s.cfg.FS, f.cfg.File)
	if err != nil {
		return nil, err
	}
	// This version is looked at once, whether it parses or not.
	f.mod, f.size = st.ModTime(), st.Size()
	if bytes.Equal(data, f.data) {
		return nil, nil // touched, or back to the version served
	}
	z, err := Parse(f.cfg.File, f.cfg.Origin, data, f.cfg.TransferTo)
	if err != nil {
		return nil, err
	}
	if z.Origin != f.origin {
		return nil, fmt.Errorf("%s: the zone's origin changed from %s to %s; a new origin needs a configuration reload",
			f.cfg.File, f.origin, z.Origin)
	}
	if int32(z.Serial-f.serial) <= 0 {
		// Served anyway, but secondaries compare serials (RFC 1982).
		s.cfg.Logger.Warn("zone file changed without a higher SOA serial; secondaries keep the old zone",
			"zone", f.origin, "file", f.cfg.File, "serial", z.Serial, "previous", f.serial)
	}
	s.cfg.Logger.Info("zone file reloaded", "zone", f.origin, "file", f.cfg.File, "serial", z.Serial, "records", len(z.Records))
	f.data, f.serial = data, z.Serial
	return z, nil
}
