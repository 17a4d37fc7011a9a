package main

import (
	"strings"
	"testing"
)

const sample = "nodes\tinvalidations\treplica_cpu\treplica_rss_mb\tlatency_p50_ms\tlatency_p99_ms\textra\n" +
	"0\ttrue\t0.070\t120.6\t0.0\t0.0\tx\n" +
	"500\tfalse\t0.300\t500.0\t0.0\t0.0\tx\n" +
	"500\ttrue\t0.400\t520.0\t80.5\t210.0\tx\n"

func TestParse(t *testing.T) {
	rows, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[2].nodes != 500 || !rows[2].invalidations || rows[2].p99 != 210 || rows[1].rss != 500 {
		t.Fatalf("rows: %+v", rows)
	}
	for _, bad := range []string{
		"",
		"nodes\tinvalidations\n",
		strings.Replace(sample, "500\tfalse", "-1\tfalse", 1),
		strings.Replace(sample, "0.300", "NaN", 1),
		strings.Replace(sample, "500\tfalse", "500\tmaybe", 1),
	} {
		if _, err := parse(strings.NewReader(bad)); err == nil {
			t.Errorf("parse(%q) gave no error", bad)
		}
	}
}

func TestRender(t *testing.T) {
	rows, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	svg := render(rows)
	for _, want := range []string{`data-series="invalidations off"`, `data-series="invalidations on"`, `data-series="p99"`, "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the drawing has no %s", want)
		}
	}
	// The run with no node starts both lines.
	if strings.Count(svg, `points="60.0,`) != 2 || strings.Count(svg, `points="400.0,`) != 2 {
		t.Errorf("the row of no node is not the start of both CPU and RSS lines:\n%s", svg)
	}
	if render(nil) == "" {
		t.Error("no rows drew nothing")
	}
}
