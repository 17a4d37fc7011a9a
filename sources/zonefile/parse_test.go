package zonefile

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
)

const good = `$ORIGIN example.org.
$TTL 60
@    SOA ns hostmaster 1 7200 3600 1209600 30
     NS  ns
ns   A   192.0.2.53
www  A   192.0.2.80
`

var clusterZones = []Reserved{{Zone: "cluster.local.", Key: "kubernetes.zones[0]"},
	{Zone: "in-addr.arpa.", Key: "kubernetes.reverseZones[0]"}}

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "db.example", good)
	// The origin comes from the configuration or, when unset, the file.
	for _, origin := range []string{"example.org", "Example.ORG.", ""} {
		s, err := Load(nil, []Zone{{File: path, Origin: origin, Key: "files.zones[0]"}}, clusterZones)
		if err != nil {
			t.Fatalf("origin %q: %v", origin, err)
		}
		z := s.initial[0]
		if z.Origin != "example.org." || z.Serial != 1 || len(z.Records) != 4 {
			t.Fatalf("origin %q: zone %s serial %d with %d records, want example.org. serial 1 with 4",
				origin, z.Origin, z.Serial, len(z.Records))
		}
	}
}

func TestLoadErrorsNameTheKeyFileAndLine(t *testing.T) {
	dir := t.TempDir()
	broken := write(t, dir, "db.broken", strings.Replace(good, "192.0.2.80", "192.0.2", 1))
	relative := write(t, dir, "db.relative", "@ 60 SOA ns hm 1 1 1 1 1\nwww 60 A 192.0.2.1\n")
	cluster := write(t, dir, "db.cluster", "$ORIGIN x.cluster.local.\n@ 60 SOA ns hm 1 1 1 1 1\n")
	parent := write(t, dir, "db.local", "$ORIGIN local.\n@ 60 SOA ns hm 1 1 1 1 1\n")
	reverse := write(t, dir, "db.192", "$ORIGIN 2.0.192.in-addr.arpa.\n@ 60 SOA ns hm 1 1 1 1 1\n")
	good := write(t, dir, "db.example", good)
	for _, c := range []struct {
		name  string
		zones []Zone
		want  []string
	}{
		{"syntax", []Zone{{File: broken, Origin: "example.org"}},
			[]string{"files.zones[0]: ", "db.broken", "line: 6"}},
		{"relative names without an origin", []Zone{{File: relative}},
			[]string{"db.relative", "line: 1", "no origin is configured"}},
		{"missing", []Zone{{File: filepath.Join(dir, "nope"), Origin: "example.org"}},
			[]string{"files.zones[0]: ", "nope"}},
		{"inside a cluster zone", []Zone{{File: cluster}},
			[]string{"db.cluster", "x.cluster.local. overlaps kubernetes.zones[0] (cluster.local.)"}},
		{"above a cluster zone", []Zone{{File: parent}},
			[]string{"origin local. overlaps kubernetes.zones[0]"}},
		{"inside a reverse zone", []Zone{{File: reverse, Origin: "2.0.192.in-addr.arpa"}},
			[]string{"origin 2.0.192.in-addr.arpa. overlaps kubernetes.reverseZones[0] (in-addr.arpa.)"}},
		{"SOA not at the configured origin", []Zone{{File: good, Origin: "example.net"}},
			[]string{"example.org. SOA: outside the zone example.net."}},
		{"the same origin twice", []Zone{{File: good, Origin: "example.org"}, {File: good, Key: "files.zones[1]"}},
			[]string{"files.zones[1] (", "origin example.org. is also the origin of files.zones[0]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.zones {
				if c.zones[i].Key == "" {
					c.zones[i].Key = "files.zones[0]"
				}
			}
			_, err := Load(nil, c.zones, clusterZones)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestFromConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`
kubernetes: {zones: [cluster.local, corp.internal]}
files:
  zones:
  - {file: db.example, origin: example.org, transferTo: ["*", 10.1.0.0/16, 127.0.0.1, "::ffff:127.0.0.2"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	zones, reserved := FromConfig(cfg)
	var to []string
	for _, p := range zones[0].TransferTo {
		to = append(to, p.String())
	}
	if got, want := strings.Join(to, " "), "0.0.0.0/0 ::/0 10.1.0.0/16 127.0.0.1/32 127.0.0.2/32"; got != want {
		t.Errorf("transferTo = %s, want %s", got, want)
	}
	if zones[0].Key != "files.zones[0]" || zones[0].Origin != "example.org" {
		t.Errorf("zone = %+v", zones[0])
	}
	var keys []string
	for _, r := range reserved {
		keys = append(keys, r.Key+"="+r.Zone)
	}
	if got, want := strings.Join(keys, " "), "kubernetes.zones[0]=cluster.local. kubernetes.zones[1]=corp.internal. "+
		"kubernetes.reverseZones[0]=in-addr.arpa. kubernetes.reverseZones[1]=ip6.arpa."; got != want {
		t.Errorf("reserved = %s, want %s", got, want)
	}
}

// A change is served, a broken change keeps the last good version, and
// going back to the served content is no change.
func TestReloadKeepsTheLastGoodVersion(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "db.example", good)
	s, err := Load(nil, []Zone{{File: path, Key: "files.zones[0]", TransferTo: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &Source{cfg: Config{Logger: slog.New(slog.DiscardHandler)}, served: s, lastErr: map[*file]string{}}
	f := s.files[0]
	// Each version gets its own modification time, as a later edit does.
	edit := func(text string, at time.Time) {
		write(t, dir, "db.example", text)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour) // edits made long enough ago to be whole
	if z, err := src.reload(f); z != nil || err != nil {
		t.Fatalf("unchanged file: zone %v, err %v", z, err)
	}

	edit(strings.Replace(good, " 1 7200", " 2 7200", 1)+"new A 192.0.2.99\n", base.Add(time.Second))
	z, err := src.reload(f)
	if err != nil || z == nil || z.Serial != 2 || len(z.Records) != 5 || z.TransferTo[0].String() != "127.0.0.1/32" {
		t.Fatalf("serial bump: zone %+v, err %v", z, err)
	}

	edit(strings.Replace(good, " 1 7200", " 3 7200", 1)+"bad A 192.0.2\n", base.Add(2*time.Second))
	if z, err := src.reload(f); z != nil || err == nil || !strings.Contains(err.Error(), "line: 7") {
		t.Fatalf("broken edit: zone %v, err %v; want an error naming line 7", z, err)
	}
	if f.serial != 2 || !strings.Contains(string(f.data), "new A") {
		t.Fatalf("broken edit replaced the last good version (serial %d)", f.serial)
	}
	// The broken version is looked at once.
	if z, err := src.reload(f); z != nil || err != nil {
		t.Fatalf("same broken version again: zone %v, err %v", z, err)
	}

	edit("$ORIGIN example.net.\n$TTL 60\n@ SOA ns hm 4 1 1 1 1\n", base.Add(3*time.Second))
	if _, err := src.reload(f); err == nil || !strings.Contains(err.Error(), "origin changed from example.org. to example.net.") {
		t.Fatalf("new origin: err %v", err)
	}

	// Written in place just now, checked every hour: the first check that
	// sees a version holds it back (it may be cut short), the next that
	// finds it the same reads it.
	src.cfg.Interval = time.Hour
	now := time.Now()
	edit(strings.Replace(good, " 1 7200", " 5 7200", 1), now) // cut short: no "new A"
	if z, err := src.reload(f); z != nil || err != nil {
		t.Fatalf("a version modified just now was read: zone %v, err %v", z, err)
	}
	edit(strings.Replace(good, " 1 7200", " 5 7200", 1)+"new A 192.0.2.98\n", now.Add(time.Millisecond))
	if z, err := src.reload(f); z != nil || err != nil {
		t.Fatalf("a version modified since the last check was read: zone %v, err %v", z, err)
	}
	z, err = src.reload(f)
	if err != nil || z == nil || z.Serial != 5 || len(z.Records) != 5 {
		t.Fatalf("the whole version, unchanged for a check: zone %+v, err %v", z, err)
	}
}
