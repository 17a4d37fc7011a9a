package corefile

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/shardns/shardns/config"
)

// Loaded is a Corefile read from this machine with its imports, and its
// conversion.
type Loaded struct {
	Corefile *Corefile
	Result   *Result
}

// LoadFile reads the Corefile at path and the files it imports from this
// machine, expanding environment references with getenv (nil keeps them,
// and the converter reports them), and converts it.
func LoadFile(path string, getenv func(string) (string, bool)) (*Loaded, error) {
	src, err := os.ReadFile(path)
	if err != nil {
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
	return cfg, nil
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
