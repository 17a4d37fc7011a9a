package corefile

import (
	"path/filepath"
	"strings"
	"testing"
)

// The default Corefiles of the distributions clusters run, as each
// project publishes it (the first line of each file names the source),
// load as `shardns serve --corefile` loads them: imports read (the
// AKS and k3s custom folders empty, as on a cluster without
// coredns-custom), no line without an equivalent, a valid configuration.
func TestRealWorldCorefiles(t *testing.T) {
	files, err := filepath.Glob("testdata/realworld/*.Corefile")
	if err != nil || len(files) < 6 {
		t.Fatalf("testdata/realworld holds %d Corefiles: %v", len(files), err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".Corefile"), func(t *testing.T) {
			l, err := LoadFile(path, nil, NodeCache{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range l.Result.Findings {
				if f.Unmapped {
					t.Errorf("unmapped: %s", f.Format(l.Result.File))
				}
			}
			cfg, err := l.Config()
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.Kubernetes.Enabled || len(cfg.Kubernetes.Zones) != 1 || strings.TrimSuffix(cfg.Kubernetes.Zones[0], ".") != "cluster.local" {
				t.Errorf("kubernetes %+v, want cluster.local served", cfg.Kubernetes)
			}
			if len(cfg.HTTP.MetricsListen) != 1 || !strings.HasSuffix(cfg.HTTP.MetricsListen[0], ":9153") {
				t.Errorf("metricsListen %v, want :9153 as prometheus says", cfg.HTTP.MetricsListen)
			}
		})
	}
}
