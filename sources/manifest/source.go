package manifest

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"reflect"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zones"
	"github.com/shardns/shardns/internal/fsutil"
	"github.com/shardns/shardns/internal/ticker"
	"github.com/shardns/shardns/model"
)

// SourceName identifies this source in zone batches and logs.
const SourceName = "manifests"

// Config configures the manifest source.
type Config struct {
	Files    []string      // YAML files served as a cluster
	FS       fs.FS         // where Files are read; nil reads the OS file system
	Interval time.Duration // how often files are checked for changes
	Manager  *actor.PID    // receives the changes
	Logger   *slog.Logger
}

// Snapshot is the parsed content of every file, as of one read.
type Snapshot struct {
	objects map[model.Key]any
	files   map[string][]byte
}

// Load reads and parses every file. At start-up its error is fatal: it
// names the file, the document and the object.
func Load(fsys fs.FS, files []string) (*Snapshot, error) {
	s := &Snapshot{objects: map[model.Key]any{}, files: map[string][]byte{}}
	for _, f := range files {
		data, err := fsutil.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		objs, err := Parse(f, data)
		if err != nil {
			return nil, err
		}
		for k, o := range objs {
			if _, dup := s.objects[k]; dup {
				return nil, fmt.Errorf("%s: %s is also defined in another file", f, k)
			}
			s.objects[k] = o
		}
		s.files[f] = data
	}
	withImpliedNamespaces(s.objects)
	return s, nil
}

// Len is the number of objects served.
func (s *Snapshot) Len() int { return len(s.objects) }

// Diff returns the changes that turn old into s; unchanged objects are
// left out so reloads send only what moved.
func (s *Snapshot) Diff(old *Snapshot) []model.Change {
	var out []model.Change
	for _, k := range sortedKeys(s.objects) {
		o := s.objects[k]
		if old != nil && reflect.DeepEqual(old.objects[k], o) {
			continue
		}
		out = append(out, model.Change{Key: k, Object: o})
	}
	if old != nil {
		for _, k := range sortedKeys(old.objects) {
			if _, ok := s.objects[k]; !ok {
				out = append(out, model.Change{Key: k})
			}
		}
	}
	return out
}

// changed reports whether any file's content differs from s.
func (s *Snapshot) changed(fsys fs.FS, files []string) bool {
	for _, f := range files {
		data, err := fsutil.ReadFile(fsys, f)
		if err != nil || !bytes.Equal(data, s.files[f]) {
			return true
		}
	}
	return false
}

// Source is the actor that serves the files and re-reads them on change.
type Source struct {
	cfg     Config
	served  *Snapshot
	cancel  func()
	lastErr string // the last reload error, logged once until it changes
}

type tick struct{}

// NewProps returns the props of a Source that starts from initial, the
// result of Load at start-up.
func NewProps(cfg Config, initial *Snapshot) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Source{cfg: cfg, served: initial} })
}

// Receive sends the initial objects, then reloads on every changed tick.
func (s *Source) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
	case *tick:
		s.onTick(ctx)
	case *zones.Replay:
		ctx.Send(s.cfg.Manager, &zones.Apply{Source: SourceName, Changes: s.served.Diff(nil), Replay: msg.ID})
		ctx.Send(s.cfg.Manager, &zones.ReplayDone{Source: SourceName, ID: msg.ID})
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
		}
	}
}

func (s *Source) onStarted(ctx actor.Context) {
	ctx.Send(s.cfg.Manager, &zones.Apply{Source: SourceName, Changes: s.served.Diff(nil)})
	ctx.Send(s.cfg.Manager, &zones.Synced{Source: SourceName, From: ctx.Self()})
	s.cancel = ticker.Every(ctx.ActorSystem(), ctx.Self(), s.cfg.Interval, &tick{})
}

// onTick reloads when a file changed. A file that no longer parses keeps
// the last good state serving.
func (s *Source) onTick(ctx actor.Context) {
	if !s.served.changed(s.cfg.FS, s.cfg.Files) {
		return
	}
	next, err := Load(s.cfg.FS, s.cfg.Files)
	if err != nil {
		if err.Error() != s.lastErr {
			s.cfg.Logger.Error("manifest reload failed; still serving the last good files", "err", err)
		}
		s.lastErr = err.Error()
		return
	}
	s.lastErr = ""
	changes := next.Diff(s.served)
	s.served = next
	if len(changes) > 0 {
		s.cfg.Logger.Info("manifests reloaded", "changes", len(changes), "objects", next.Len())
		ctx.Send(s.cfg.Manager, &zones.Apply{Source: SourceName, Changes: changes})
	}
}
