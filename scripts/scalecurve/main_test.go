package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

const header = "services\tendpoints\tserver\twatch\treplicas\tsteady_rss_mb\tpeak_rss_mb\tready_s\tsync_cpu_s\tsync_cpu_total_s\n"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []row
		err      string
	}{
		{name: "rows", in: header + "5000\t10\tcoredns\tall\t1\t100.5\t120\t3\t1\t1\n\n5000\t10\tshardns\tsharded\t6\t40\t45.5\t2\t1\t5\n",
			want: []row{{5000, "coredns", "all", 1, 100.5, 120}, {5000, "shardns", "sharded", 6, 40, 45.5}}},
		{name: "columns in another order, one more",
			in:   "peak_rss_mb\tsteady_rss_mb\treplicas\twatch\tserver\tservices\tnew\n7\t6\t3\tunsharded\tshardns\t20000\tx\n",
			want: []row{{20000, "shardns", "unsharded", 3, 6, 7}}},
		{name: "empty", in: "", err: "no header"},
		{name: "header only", in: header, err: "no rows"},
		{name: "a column missing", in: "services\tserver\n1\tx\n", err: `no column "watch"`},
		{name: "a field missing", in: header + "5000\t10\tcoredns\tall\t1\t100\n", err: "line 2: 6 fields"},
		{name: "not a number", in: header + "5000\t10\tcoredns\tall\t1\tlots\t1\t1\t1\t1\n", err: `steady_rss_mb "lots"`},
		{name: "negative", in: header + "5000\t10\tcoredns\tall\t1\t1\t-1\t1\t1\t1\n", err: `peak_rss_mb "-1"`},
		{name: "no services", in: header + "0\t10\tcoredns\tall\t1\t1\t1\t1\t1\t1\n", err: "services is 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parse(strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d rows, want %d: %+v", len(got), len(c.want), got)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("row %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestRender(t *testing.T) {
	rows := []row{
		{5000, "coredns", "all", 1, 90, 100},
		{20000, "coredns", "all", 1, 190, 200},
		{5000, "shardns", "sharded", 6, 30, 35},
		{20000, "shardns", "sharded", 6, 35, 40},
		{20000, "shardns", "sharded", 6, 36, 50}, // a later run of the same point
		{5000, "shardns", "unsharded", 3, 40, 60},
	}
	svg := render(rows)
	if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>\n") {
		t.Fatalf("not one svg element:\n%s", svg)
	}
	lines := regexp.MustCompile(`data-series="([^"]+)" points="([^"]*)"`).FindAllStringSubmatch(svg, -1)
	points := map[string][]int{} // series → points per panel
	for _, l := range lines {
		points[l[1]] = append(points[l[1]], len(strings.Fields(l[2])))
	}
	want := map[string][]int{
		"CoreDNS":       {2, 2},    // peak, steady; not its own ratio
		"N=6 sharded":   {2, 2, 2}, // the later run replaces the earlier
		"N=3 unsharded": {1, 1, 1},
	}
	for name, n := range want {
		if got := points[name]; !slices.Equal(got, n) {
			t.Errorf("series %s: points per panel %v, want %v", name, got, n)
		}
	}
	for _, text := range []string{">5k<", ">20k<", "target ≤ 0.2 at N=6", "stroke-dasharray=\"6 4\""} {
		if !strings.Contains(svg, text) {
			t.Errorf("no %q in the drawing", text)
		}
	}
}
