package corefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// distribution is one default Corefile of testdata/distributions (each
// file's first lines name its source and how it was rendered) and the
// lines its conversion leaves out today.
type distribution struct {
	// root is the folder under testdata/distributions that stands for
	// the CoreDNS container's file system, which imports read (the
	// coredns-custom keys a distribution ships); "" is an empty one.
	root string
	// dir is the Corefile's directory in that file system, from which
	// its relative imports are read; "" is /etc/coredns, where every
	// distribution but node-cache's mounts it.
	dir string
	// unmapped are the findings left out, as Finding.Format prints
	// them, in the converter's order. A line gaining an equivalent
	// removes its entry here; a vendor's own plugin is expected to stay.
	unmapped []string
}

// distributions lists every file of testdata/distributions, each with
// what shardns cannot map in it today. docs/distributions.md tells the
// same per distribution.
var distributions = map[string]distribution{
	"ack": {},
	"ack-edge": {unmapped: []string{
		// k8s_event (CoreDNS's log sent as Kubernetes Events) stays
		// unmapped; kubeapi, its API client, converts to a note.
		"ack-edge.Corefile:15: k8s_event: shardns does not report its log as Kubernetes Events; its errors are in its log (log.errors) and its metrics",
	}},
	"aks":        {},
	"aks-custom": {root: "aks-custom"},
	"aks-engine": {root: "aks-engine"},
	"baidu-cce":  {},
	"eks":        {},
	"gardener":   {root: "gardener"},
	"gardener-custom": {root: "gardener-custom", unmapped: []string{
		"/etc/coredns/custom/corefile.override:3: plugin \"debug\" has no shardns equivalent", // CoreDNS's debug mode (no panic recovery, debug logs); shardns has none
		// whoami answers every name in the block: on the cluster's own
		// listener it would shadow every other answer.
		"/etc/coredns/custom/corefile.override:4: whoami on dns.listen has no shardns equivalent; give its server block a port of its own",
	}},
	"gardener-nodelocal":     {root: "gardener", dir: "/etc"},
	"helm":                   {},
	"k0s":                    {},
	"k3s":                    {},
	"kind":                   {},
	"kops":                   {},
	"kops-dns-none":          {},
	"kops-ipv6":              {},
	"kube-up":                {},
	"kubeadm":                {},
	"kubespray":              {},
	"kubespray-nodelocaldns": {},
	"lke":                    {},
	"microk8s":               {},
	"microk8s-fallback":      {},
	"minikube":               {},
	"nodelocaldns":           {},
	"oks":                    {},
	"openshift":              {},
	"openshift-debug":        {},
	"openshift-servers":      {},
	"rke2":                   {},
	"rke2-nodelocal":         {},
	"talos":                  {},
	"tke":                    {},
}

// The default Corefile of every distribution converts, and what it
// leaves out is exactly the table's list: a line that gains an
// equivalent, or one that loses it, fails until the table says so.
func TestDistributionCorefiles(t *testing.T) {
	paths, err := filepath.Glob("testdata/distributions/*.Corefile")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".Corefile")
		seen[name] = true
		d, ok := distributions[name]
		if !ok {
			t.Errorf("%s: not in the distributions table", path)
			continue
		}
		t.Run(name, func(t *testing.T) {
			got := distributionUnmapped(t, path, d)
			if !slices.Equal(got, d.unmapped) {
				t.Errorf("unmapped findings changed; got:\n\t%s\nwant:\n\t%s",
					strings.Join(got, "\n\t"), strings.Join(d.unmapped, "\n\t"))
			}
		})
	}
	for name := range distributions {
		if !seen[name] {
			t.Errorf("%s: in the table but testdata/distributions/%s.Corefile is missing", name, name)
		}
	}
	if len(paths) < 34 {
		t.Errorf("testdata/distributions holds %d Corefiles, want at least 34", len(paths))
	}
}

// distributionUnmapped parses and converts the Corefile at path with
// d's file system and returns its unmapped findings.
func distributionUnmapped(t *testing.T, path string, d distribution) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var files fs.FS = fstest.MapFS{}
	if d.root != "" {
		files = os.DirFS(filepath.Join("testdata/distributions", d.root))
	}
	dir := d.dir
	if dir == "" {
		dir = "/etc/coredns"
	}
	cf, err := Parse(filepath.Base(path), src, Options{Files: files, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(cf)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range res.Findings {
		if f.Unmapped {
			out = append(out, f.Format(res.File))
		}
	}
	return out
}
