package membership

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string // empty: valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no name", func(c *Config) { c.NodeName = "" }, "node name is required"},
		{"empty bind takes default", func(c *Config) { c.Bind = "" }, ""},
		{"bind without port", func(c *Config) { c.Bind = "127.0.0.1" }, `bind "127.0.0.1"`},
		{"bind host name", func(c *Config) { c.Bind = "localhost:7946" }, "must be an IP address"},
		{"bind all IPv6 needs advertise", func(c *Config) { c.Bind = "[::]:7946" }, "set advertise"},
		{"bind all IPv6 with advertise", func(c *Config) { c.Bind = "[::]:7946"; c.Advertise = "[fd00::1]:7946" }, ""},
		{"advertise host name", func(c *Config) { c.Advertise = "pod-0:7946" }, "must be an IP address"},
		{"advertise bad port", func(c *Config) { c.Advertise = "10.0.0.1:99999" }, "invalid port"},
		{"seed without port", func(c *Config) { c.Seeds = []string{"shardns-0.shardns", "10.0.0.1", "[fd00::1]"} }, ""},
		{"seed bad port", func(c *Config) { c.Seeds = []string{"10.0.0.1:x"} }, `seed "10.0.0.1:x"`},
		{"label too long", func(c *Config) { c.Label = strings.Repeat("x", 256) }, "label is 256 bytes"},
		{"meta too long", func(c *Config) { c.Meta = make([]byte, 513) }, "meta is 513 bytes"},
		{"short key", func(c *Config) { c.SecretKeys = [][]byte{make([]byte, 16), make([]byte, 15)} }, "secret key 2: key is 15 bytes"},
		{"probe timeout above interval", func(c *Config) { c.Timing.ProbeTimeout = 2 * time.Second }, "exceeds probe interval"},
		{"negative timing", func(c *Config) { c.Timing.GossipInterval = -1 }, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NodeName = "a"
			tc.edit(&cfg)
			err := cfg.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestZeroTimingFieldsTakeDefaults(t *testing.T) {
	t.Parallel()
	cfg := Config{NodeName: "a", Timing: Timing{ProbeInterval: 2 * time.Second}}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	want := DefaultTiming()
	want.ProbeInterval = 2 * time.Second
	if cfg.Timing != want {
		t.Fatalf("timing = %+v, want %+v", cfg.Timing, want)
	}
	if cfg.Bind != "0.0.0.0:7946" || cfg.RejoinInterval != 10*time.Second || cfg.Logger == nil {
		t.Fatalf("defaults not filled: %+v", cfg)
	}
}

func TestReadSecretKeys(t *testing.T) {
	t.Parallel()
	key16 := []byte("0123456789abcdef")
	key32 := bytes.Repeat([]byte{0xA5}, 32)
	for _, tc := range []struct {
		name    string
		content []byte
		want    [][]byte
		wantErr string
	}{
		{"base64 of 32 bytes", []byte(base64.StdEncoding.EncodeToString(key32) + "\n"), [][]byte{key32}, ""},
		{"base64 of 16 bytes", []byte(base64.StdEncoding.EncodeToString(key16)), [][]byte{key16}, ""},
		{"raw 16 bytes", key16, [][]byte{key16}, ""},
		{"raw 32 bytes with newline", []byte("0123456789abcdef-123456789abcdef\n"), [][]byte{[]byte("0123456789abcdef-123456789abcdef")}, ""},
		// 32 characters of the base64 alphabet decode to 24 bytes: base64
		// wins, the same way on every node.
		{"ambiguous is base64", []byte("0123456789abcdef0123456789abcdef"), [][]byte{mustBase64("0123456789abcdef0123456789abcdef")}, ""},
		// A rotation: the new key first, the old one still accepted.
		{"two base64 keys", []byte(base64.StdEncoding.EncodeToString(key32) + "\n" + base64.StdEncoding.EncodeToString(key16) + "\n"),
			[][]byte{key32, key16}, ""},
		{"a bad second line", []byte(base64.StdEncoding.EncodeToString(key32) + "\nnot-a-key\n"), nil, "line 2 is not a base64 key"},
		{"empty", []byte(" \n"), nil, "is empty"},
		{"wrong length", []byte("too short"), nil, "key is 9 bytes"},
		{"base64 of wrong length", []byte(base64.StdEncoding.EncodeToString(make([]byte, 20))), nil, "base64 of a key is 20 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gossip.key")
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadSecretKeys(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error = %v, want one naming %s and containing %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, bytes.Equal) {
				t.Fatalf("key = %x, want %x", got, tc.want)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "absent.key")
	if _, err := ReadSecretKeys(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: error = %v, want one naming %s", err, missing)
	}
}

// records collects slog records for inspection.
type records struct {
	slog.Handler
	got chan slog.Record
}

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	r.got <- rec
	return nil
}

func TestMemberlistLogGoesToSlogAtDebug(t *testing.T) {
	t.Parallel()
	h := records{got: make(chan slog.Record, 1)}
	newStdLogger(slog.New(h), nil).Printf("[ERR] memberlist: Failed to send ping: %s", "boom")
	rec := <-h.got
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if rec.Level != slog.LevelDebug || rec.Message != "Failed to send ping: boom" ||
		attrs["memberlist_level"] != "ERR" || attrs["component"] != "memberlist" {
		t.Fatalf("record = %v %q %v", rec.Level, rec.Message, attrs)
	}
}

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
