package manifest

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"reflect"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zonemanager"
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
	contents, err := readFiles(fsys, files)
	if err != nil {
		return nil, err
	}
	return parseFiles(files, contents)
}

// readFiles reads every file.
func readFiles(fsys fs.FS, files []string) (map[string][]byte, error) {
	contents := make(map[string][]byte, len(files))
	for _, f := range files {
		data, err := fsutil.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		contents[f] = data
	}
	return contents, nil
}

// parseFiles parses what readFiles read.
func parseFiles(files []string, contents map[string][]byte) (*Snapshot, error) {
	s := &Snapshot{objects: map[model.Key]any{}, files: contents}
	for _, f := range files {
		objs, err := Parse(f, contents[f])
		if err != nil {
			return nil, err
		}
		for k, o := range objs {
			if _, dup := s.objects[k]; dup {
				return nil, fmt.Errorf("%s: %s is also defined in another file", f, k)
			}
			s.objects[k] = o
		}
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

// Source is the actor that serves the files and re-reads them on change.
type Source struct {
	cfg     Config
	served  *Snapshot
	cancel  func()
	lastErr string // the last reload error, logged once until it changes
	// settling is what the last tick read when it differed from what is
	// served: a change is taken once the next tick reads it again.
	settling map[string][]byte
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
	case *zonemanager.Replay:
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: s.served.Diff(nil), Replay: msg.ID})
		ctx.Send(s.cfg.Manager, &zonemanager.ReplayDone{Source: SourceName, ID: msg.ID})
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
		}
	}
}

func (s *Source) onStarted(ctx actor.Context) {
	ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: s.served.Diff(nil)})
	ctx.Send(s.cfg.Manager, &zonemanager.Synced{Source: SourceName, From: ctx.Self()})
	s.cancel = ticker.Every(ctx.ActorSystem(), ctx.Self(), s.cfg.Interval, &tick{})
}

// onTick reloads when a file changed. A file that no longer parses keeps
// the last good state serving.
func (s *Source) onTick(ctx actor.Context) {
	if changes := s.reload(); len(changes) > 0 {
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes})
	}
}

// reload reads the files and returns the changes from what is served to
// what they hold, and serves that. A file written in place (truncated,
// then written) can be read empty or cut short in between, and a cut
// file may even parse: served, it would delete what the rest of the file
// holds until the next tick. So a change is taken only once two ticks in
// a row read the same bytes, one interval later than it was seen.
func (s *Source) reload() []model.Change {
	contents, err := readFiles(s.cfg.FS, s.cfg.Files)
	if err == nil && maps.EqualFunc(contents, s.served.files, bytes.Equal) {
		s.settling = nil
		return nil
	}
	if err == nil && (s.settling == nil || !maps.EqualFunc(contents, s.settling, bytes.Equal)) {
		s.settling = contents
		return nil
	}
	var next *Snapshot
	if err == nil {
		next, err = parseFiles(s.cfg.Files, contents)
	}
	if err != nil {
		if err.Error() != s.lastErr {
			s.cfg.Logger.Error("manifest reload failed; still serving the last good files", "err", err)
		}
		s.lastErr = err.Error()
		return nil
	}
	s.lastErr, s.settling = "", nil
	changes := next.Diff(s.served)
	s.served = next
	if len(changes) > 0 {
		s.cfg.Logger.Info("manifests reloaded", "changes", len(changes), "objects", next.Len())
	}
	return changes
}
