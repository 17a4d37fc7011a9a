package config

import (
	"strings"
	"testing"
)

func TestParseFilesRejects(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"no file", "files: {zones: [{origin: example.org}]}", "files.zones[0].file: is empty"},
		{"origin", "files: {zones: [{file: db, origin: 'a..b'}]}", "files.zones[0].origin[0]"},
		{"transferTo", "files: {zones: [{file: db, transferTo: [nowhere]}]}", `files.zones[0].transferTo[0]: "nowhere" is not`},
		{"interval", "files: {interval: 0s}", "files.interval: must be positive"},
		{"a cluster domain", "files: {zones: [{file: db, origin: cluster.local}]}",
			`files.zones[0].origin: "cluster.local" overlaps kubernetes.zones[0] "cluster.local"`},
		{"inside a reverse zone", "files: {zones: [{file: db, origin: 2.0.192.in-addr.arpa.}]}",
			`files.zones[0].origin: "2.0.192.in-addr.arpa." overlaps kubernetes.reverseZones[0] "in-addr.arpa"`},
		{"above a cluster domain", "files: {zones: [{file: db, origin: LOCAL}]}", `overlaps kubernetes.zones[0]`},
		{"twice", "files: {zones: [{file: a, origin: example.org}, {file: b, origin: Example.ORG.}]}",
			`files.zones[1].origin: "Example.ORG." is also the origin of files.zones[0]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("kubernetes: {enabled: false}\n" + c.yaml + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestParseFiles(t *testing.T) {
	cfg, err := Parse([]byte(`
kubernetes: {reverseZones: [10.in-addr.arpa, ip6.arpa]}
files:
  interval: 1s
  zones:
  - {file: db.example, origin: example.org, transferTo: ["*", 10.0.0.0/8, "::1"]}
  - {file: db.192, origin: 2.0.192.in-addr.arpa}
  - {file: db.sub, origin: sub.example.org}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Files.Zones) != 3 || cfg.Files.Interval.D().Seconds() != 1 {
		t.Fatalf("files = %+v", cfg.Files)
	}
}
