package corefile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/forward"
)

// Loaded is a Corefile read from this machine with its imports, and its
// conversion.
type Loaded struct {
	Corefile *Corefile
	Result   *Result
}

// LoadFile reads the Corefile at path and the files it imports from this
// machine, expanding environment references with getenv (nil keeps them,
// and the converter reports them), fills the placeholders node-cache
// fills in NodeLocal DNSCache's Corefile as nc says (FillNodeCache), and
// converts it.
func LoadFile(path string, getenv func(string) (string, bool), nc NodeCache) (*Loaded, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if src, err = FillNodeCache(path, src, nc); err != nil {
		return nil, err
	}
	opts := Options{Getenv: getenv}
	if err := opts.SetLocalFiles(path); err != nil {
		return nil, err
	}
	cf, err := Parse(path, src, opts)
	if err != nil {
		return nil, err
	}
	res, err := Convert(cf)
	if err != nil {
		return nil, err
	}
	return &Loaded{Corefile: cf, Result: res}, nil
}

// Config is the configuration the Corefile converts to, validated as a
// configuration file would be, or an error listing every line that has
// no shardns equivalent (as `shardns convert` prints them): serving a
// Corefile without one of its settings would answer otherwise than
// CoreDNS does.
func (l *Loaded) Config() (*config.Config, error) {
	file := l.Result.File
	var unmapped []string
	for _, f := range l.Result.Findings {
		if f.Unmapped {
			unmapped = append(unmapped, f.Format(file))
		}
	}
	if len(unmapped) > 0 {
		return nil, fmt.Errorf("%d Corefile settings have no shardns equivalent:\n  %s", len(unmapped), strings.Join(unmapped, "\n  "))
	}
	out, err := l.Result.YAML()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(out)
	if err != nil {
		return nil, fmt.Errorf("%s converts to an invalid configuration: %w", file, err)
	}
	if err := l.Result.checkTLSFiles(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkTLSFiles reads the files of forward's tls options as the
// forwarder will, so that one that cannot be read is reported at its
// Corefile line rather than by the configuration key it became. CoreDNS
// refuses to start on such a file too.
func (r *Result) checkTLSFiles() error {
	var bad []Finding
	for t, at := range r.tlsPlaces {
		files := forward.TLSFiles{ServerName: t.ServerName, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}
		if _, err := forward.LoadTLS(files, 1); err != nil {
			bad = append(bad, Finding{File: at.file, Line: at.line, Unmapped: true, Msg: "forward tls: " + err.Error()})
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.SortFunc(bad, func(a, b Finding) int { return cmp.Or(strings.Compare(a.File, b.File), a.Line-b.Line) })
	lines := make([]string, len(bad))
	for i, f := range bad {
		lines[i] = f.Format(r.File)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// Contents are the names and contents of every file the Corefile was
// read from, in order: what changes when any of them does, or when a
// glob matches another file.
func (l *Loaded) Contents() ([]byte, error) {
	var b bytes.Buffer
	for _, name := range l.Corefile.Sources {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s\x00%d\x00", name, len(data))
		b.Write(data)
	}
	return b.Bytes(), nil
}

// LoadKubeDNS reads the kube-dns ConfigMap at path (a manifest or its
// data), translates it to the Corefile of the kube-dns to CoreDNS
// migration (KubeDNSCorefile) and converts that. Findings name lines of
// that Corefile; Sources is the ConfigMap's file.
func LoadKubeDNS(path string, opts KubeDNSOptions) (*Loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text, err := KubeDNSCorefile(data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cf, err := Parse(path+" as Corefile", text, Options{})
	if err != nil {
		return nil, err
	}
	cf.Sources = []string{path}
	res, err := Convert(cf)
	if err != nil {
		return nil, err
	}
	return &Loaded{Corefile: cf, Result: res}, nil
}
