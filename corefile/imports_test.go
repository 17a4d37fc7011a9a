package corefile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// files makes a file system of name, content pairs.
func files(pairs ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = &fstest.MapFile{Data: []byte(pairs[i+1])}
	}
	return m
}

func getenvOf(env map[string]string) func(string) (string, bool) {
	if env == nil {
		return nil
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestParseImportsFiles(t *testing.T) {
	cases := []struct {
		name    string
		files   fstest.MapFS
		dir     string
		env     map[string]string
		src     string
		want    string
		sources []string // after "Corefile"
	}{
		{name: "top-level import of a file with a server block",
			files: files("extra.server", "example.com:53 {\n  forward . 10.0.0.10\n}\n"),
			src:   ". {\n  whoami\n}\nimport extra.server\n",
			want:  ".@1 {whoami@2} | example.com:53@extra.server:1 {forward . 10.0.0.10@extra.server:2}", sources: []string{"extra.server"}},
		{name: "import inside a block",
			files: files("common.conf", "log\nhealth {\n  lameduck 5s\n}\n"),
			src:   ".:53 {\n  errors\n  import common.conf\n  cache 30\n}\n",
			want:  ".:53@1 {errors@2; log@common.conf:1; health {lameduck 5s;}@common.conf:2; cache 30@4}", sources: []string{"common.conf"}},
		{name: "import inside a plugin's block",
			files: files("kube.conf", "pods insecure\nttl 30\n"),
			src:   ". {\n  kubernetes cluster.local {\n    import kube.conf\n  }\n}\n",
			want:  ".@1 {kubernetes cluster.local {pods insecure;ttl 30;}@2}", sources: []string{"kube.conf"}},
		{name: "glob matches two files, read in sorted order",
			files: files("custom/b.override", "log", "custom/a.override", "errors", "custom/c.server", "x.example"),
			src:   ". { import custom/*.override }",
			want:  ".@1 {errors@custom/a.override:1; log@custom/b.override:1}", sources: []string{"custom/a.override", "custom/b.override"}},
		{name: "glob matching nothing imports nothing",
			files: files(),
			src:   ".:53 {\n  import custom/*.override\n  cache\n}\nimport custom/*.server\n",
			want:  ".:53@1 {cache@3}"},
		{name: "snippet defined in an imported file",
			files: files("snippets.conf", "(common) {\n  errors\n  cache 30\n}\n"),
			src:   "import snippets.conf\n. {\n  import common\n}\n",
			want:  ".@2 {errors@snippets.conf:2; cache 30@snippets.conf:3}", sources: []string{"snippets.conf"}},
		{name: "a snippet name takes precedence over a file",
			files: files("common", "log"),
			src:   "(common) {\n  errors\n}\n. {\n  import common\n}\n",
			want:  ".@4 {errors@2}"},
		{name: "relative paths from the importing file's directory",
			files: files("conf/zones/a.server", "a.example {\n  import ../plugins/log.conf\n}\n",
				"conf/plugins/log.conf", "log\n", "plugins/log.conf", "errors\n"),
			src:  "import conf/zones/*.server\n",
			want: "a.example@conf/zones/a.server:1 {log@conf/plugins/log.conf:1}", sources: []string{"conf/zones/a.server", "conf/plugins/log.conf"}},
		{name: "absolute and relative paths with the Corefile in /etc/coredns",
			files:   files("etc/coredns/custom/local.conf", "log", "etc/coredns/custom/x.server", "x.example {\n  whoami\n}\n"),
			dir:     "/etc/coredns",
			src:     ". {\n  import custom/local.conf\n}\nimport /etc/coredns/custom/*.server\n",
			want:    ".@1 {log@/etc/coredns/custom/local.conf:1} | x.example@/etc/coredns/custom/x.server:1 {whoami@/etc/coredns/custom/x.server:2}",
			sources: []string{"/etc/coredns/custom/local.conf", "/etc/coredns/custom/x.server"}},
		{name: "a directory whose name holds glob characters",
			files: files("srv/dns[1]/custom/a.override", "log", "srv/dns1/custom/b.override", "errors"),
			dir:   "/srv/dns[1]",
			src:   ". {\n  import custom/*.override\n}\n",
			want:  ".@1 {log@/srv/dns[1]/custom/a.override:1}", sources: []string{"/srv/dns[1]/custom/a.override"}},
		{name: "a file imported twice is no cycle, and is listed once",
			files: files("a.conf", "log"),
			src:   ". {\n  import a.conf\n}\nx.example {\n  import a.conf\n}\n",
			want:  ".@1 {log@a.conf:1} | x.example@4 {log@a.conf:1}", sources: []string{"a.conf"}},
		{name: "environment references in paths and imported files",
			files: files("conf/a.conf", "forward . {$UP}"),
			env:   map[string]string{"DIR": "conf", "UP": "10.0.0.1"},
			src:   ". {\n  import {$DIR}/a.conf\n}\n",
			want:  ".@1 {forward . 10.0.0.1@conf/a.conf:1}", sources: []string{"conf/a.conf"}},
		{name: "a path with an unexpanded environment reference is kept",
			files: files("conf/a.conf", "log"),
			src:   ". {\n  import {$DIR}/a.conf\n}\nimport {$DIR}/*.server\n",
			want:  ".@1 {import {$DIR}/a.conf@2} | import {$DIR}/*.server@4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := Options{Files: c.files, Dir: c.dir, Getenv: getenvOf(c.env)}
			cf, err := Parse("Corefile", []byte(c.src), opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(cf); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
			if want := append([]string{"Corefile"}, c.sources...); !reflect.DeepEqual(cf.Sources, want) {
				t.Errorf("sources %q, want %q", cf.Sources, want)
			}
		})
	}
}

func TestParseImportErrorsNameTheFileAndLine(t *testing.T) {
	device := files()
	device["dev"] = &fstest.MapFile{Mode: fs.ModeDevice}
	cases := []struct {
		name  string
		files fstest.MapFS
		env   map[string]string
		src   string
		want  string
	}{
		{name: "missing file", files: files(), src: ". {\n  log\n  import extra.conf\n}\n",
			want: "Corefile:3: import extra.conf: extra.conf does not exist"},
		{name: "missing file named by an imported file", files: files("a.conf", "log\nimport sub/b.conf\n"),
			src: ". {\n  import a.conf\n}\n", want: "a.conf:2: import sub/b.conf: sub/b.conf does not exist"},
		{name: "a file importing itself", files: files("a.conf", "log\nimport a.conf\n"),
			src: ". {\n  import a.conf\n}\n", want: "a.conf:2: import a.conf: a cycle of imports: a.conf -> a.conf"},
		{name: "two files importing each other", files: files("a.conf", "import b.conf", "b.conf", "log\nimport a.conf"),
			src: ". {\n  import a.conf\n}\n", want: "b.conf:2: import a.conf: a cycle of imports: b.conf -> a.conf -> b.conf"},
		{name: "the Corefile importing itself", files: files("Corefile", "."),
			src: ". {\n}\nimport Corefile\n", want: "Corefile:3: import Corefile: a cycle of imports: Corefile -> Corefile"},
		{name: "a glob matching its own file", files: files("conf/a.server", "import *.server"),
			src: "import conf/*.server\n", want: "conf/a.server:1: import *.server: a cycle of imports: conf/a.server -> conf/a.server"},
		{name: "syntax error in an imported file", files: files("a.server", "x.example {\n  log\n"),
			src: "import a.server\n", want: `a.server:1: "{" opened here is not closed`},
		{name: "unset variable in an imported file", files: files("a.conf", "log\nforward . {$NOPE}"), env: map[string]string{},
			src: ". {\n  import a.conf\n}\n", want: "a.conf:2: environment variable NOPE is not set"},
		{name: "a directory", files: files("custom/a.conf", "log"),
			src: ". {\n  import custom\n}\n", want: "Corefile:2: import custom: custom is a directory"},
		{name: "not a regular file", files: device,
			src: ". {\n  import dev\n}\n", want: "Corefile:2: import dev: dev is not a regular file"},
		{name: "two paths", files: files(),
			src: ". {\n  import a b\n}\n", want: "Corefile:2: import takes one file, glob pattern or snippet name"},
		{name: "a glob CoreDNS refuses", files: files(),
			src: "import */*.server\n", want: "Corefile:1: import */*.server: a glob pattern may hold one * and one ?, and no [...]"},
		{name: "a malformed glob", files: files(),
			src: "import a[.server\n", want: "Corefile:1: import a[.server: syntax error in pattern"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("Corefile", []byte(c.src), Options{Files: c.files, Getenv: getenvOf(c.env)})
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v, want %s", err, c.want)
			}
		})
	}
}

// Files that each import the next twice would splice 2^n copies: the
// bound on imports stops them.
func TestParseImportsAreBounded(t *testing.T) {
	m := files("f11.conf", "log")
	for i := range 11 {
		m[fmt.Sprintf("f%d.conf", i)] = &fstest.MapFile{Data: fmt.Appendf(nil, "import f%d.conf\nimport f%[1]d.conf\n", i+1)}
	}
	_, err := Parse("Corefile", []byte(". {\n  import f0.conf\n}\n"), Options{Files: m})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d imports of files", maxSpliced)) {
		t.Fatalf("error %v, want the bound on imports", err)
	}
}

// SetLocalFiles reads this machine's files, relative imports from the
// Corefile's directory, and names them by their absolute paths.
func TestSetLocalFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "custom", "a.override"), "log\n")
	var opts Options
	if err := opts.SetLocalFiles(filepath.Join(dir, "Corefile")); err != nil {
		t.Fatal(err)
	}
	cf, err := Parse("Corefile", []byte(". {\n  import custom/*.override\n}\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Corefile", filepath.ToSlash(filepath.Join(dir, "custom", "a.override"))}
	if !reflect.DeepEqual(cf.Sources, want) || len(cf.Blocks[0].Directives) != 1 {
		t.Errorf("sources %q, want %q; parsed %s", cf.Sources, want, render(cf))
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
