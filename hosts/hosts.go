package hosts

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardns/shardns/internal/fsutil"
)

// Config configures a Hosts.
type Config struct {
	Options
	// Entries are inline hosts lines.
	Entries []string
	// Files in /etc/hosts format, re-read when they change.
	Files []string
	// Interval between checks of the files.
	Interval time.Duration
	Logger   *slog.Logger
}

// Hosts publishes the snapshot of the configured entries and files, and
// re-reads the files every Interval between Start and Stop.
type Hosts struct {
	cfg    Config
	inline []Entry
	files  []*hostsFile // touched only by New and the reload goroutine
	snap   atomic.Pointer[Snapshot]
	stop   chan struct{}
	wg     sync.WaitGroup
}

// hostsFile is one file and what was last read of it.
type hostsFile struct {
	path     string
	modTime  time.Time
	size     int64
	entries  []Entry // the last good content
	failing  string  // the error last logged, so a broken file is logged once
	settling fsutil.Settling
}

// New reads the entries and the files. An inline entry or a file that
// does not parse is an error naming it and the line; nothing is started.
func New(cfg Config) (*Hosts, error) {
	h := &Hosts{cfg: cfg, stop: make(chan struct{})}
	for i, line := range cfg.Entries {
		e, ok, err := ParseLine(line)
		if err != nil {
			return nil, fmt.Errorf("hosts.entries[%d]: %w", i, err)
		}
		if ok {
			h.inline = append(h.inline, e)
		}
	}
	for _, path := range cfg.Files {
		f := &hostsFile{path: path}
		if err := f.read(); err != nil {
			return nil, fmt.Errorf("hosts.files: %w", err)
		}
		h.files = append(h.files, f)
	}
	h.publish()
	return h, nil
}

// Snapshot is the entries being served.
func (h *Hosts) Snapshot() *Snapshot { return h.snap.Load() }

// Start checks the files every Interval until Stop.
func (h *Hosts) Start() {
	if len(h.files) == 0 {
		return
	}
	h.wg.Go(func() {
		t := time.NewTicker(h.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.Reload()
			}
		}
	})
}

// Stop ends the checks and waits for them.
func (h *Hosts) Stop() {
	close(h.stop)
	h.wg.Wait()
}

// Reload checks the files once and publishes a new snapshot when one of
// them changed. A file that cannot be read or does not parse keeps its
// last good entries, and is logged once. A changed file is read once it
// is whole (fsutil.Settling): modified at least Interval ago, or found
// by this check as the one before found it. It reports whether a
// snapshot was published. Only one goroutine may call it at a time.
func (h *Hosts) Reload() bool {
	changed := false
	for _, f := range h.files {
		st, err := os.Stat(f.path)
		if err != nil {
			h.failed(f, err)
			continue
		}
		if st.ModTime().Equal(f.modTime) && st.Size() == f.size {
			continue // unchanged, or the broken version already logged
		}
		if !f.settling.Ready(st, h.cfg.Interval) {
			continue
		}
		if err := f.read(); err != nil {
			h.failed(f, err)
			continue
		}
		f.failing = ""
		changed = true
		h.cfg.Logger.Info("hosts file reloaded", "file", f.path, "entries", len(f.entries))
	}
	if changed {
		h.publish()
	}
	return changed
}

func (h *Hosts) failed(f *hostsFile, err error) {
	if msg := err.Error(); msg != f.failing {
		f.failing = msg
		h.cfg.Logger.Warn("hosts file not loaded; its last good entries keep serving", "file", f.path, "err", err)
	}
}

// read loads the file. Its time and size are recorded even when it does
// not parse, so a broken version is read (and logged) once.
func (f *hostsFile) read() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	f.modTime, f.size = st.ModTime(), st.Size()
	entries, err := Parse(bytes.NewReader(data), f.path)
	if err != nil {
		return err
	}
	f.entries = entries
	return nil
}

func (h *Hosts) publish() {
	all := append([]Entry(nil), h.inline...)
	for _, f := range h.files {
		all = append(all, f.entries...)
	}
	h.snap.Store(NewSnapshot(h.cfg.Options, all))
}
