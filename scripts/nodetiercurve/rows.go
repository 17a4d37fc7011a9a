package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/shardns/shardns/scripts/internal/benchtsv"
)

// row is one window of the bench: one node count, with invalidations
// asked for or not.
type row struct {
	nodes         int
	invalidations bool
	cpu           float64 // the replicas' CPU-seconds a second, together
	rss           float64 // the replicas' RSS in MB, together
	p50, p99      float64 // ms from a change sent to the API to a node told of it
}

// columns the drawing needs, by the names of the bench's header.
var columns = []string{"nodes", "invalidations", "replica_cpu", "replica_rss_mb", "latency_p50_ms", "latency_p99_ms"}

// parse reads the bench's TSV (see benchtsv.Read).
func parse(in io.Reader) ([]row, error) {
	return benchtsv.Read(in, columns, parseRow)
}

func parseRow(rec benchtsv.Record) (row, error) {
	var r row
	var err error
	if r.nodes, err = strconv.Atoi(rec.Get("nodes")); err != nil || r.nodes < 0 {
		return row{}, fmt.Errorf("nodes %q", rec.Get("nodes"))
	}
	if r.invalidations, err = strconv.ParseBool(rec.Get("invalidations")); err != nil {
		return row{}, fmt.Errorf("invalidations %q", rec.Get("invalidations"))
	}
	for _, v := range []struct {
		name string
		to   *float64
	}{{"replica_cpu", &r.cpu}, {"replica_rss_mb", &r.rss}, {"latency_p50_ms", &r.p50}, {"latency_p99_ms", &r.p99}} {
		x, err := strconv.ParseFloat(rec.Get(v.name), 64)
		if err != nil || x < 0 || x != x {
			return row{}, fmt.Errorf("%s %q", v.name, rec.Get(v.name))
		}
		*v.to = x
	}
	return r, nil
}

// nodeCounts are the distinct node counts of rows, ascending.
func nodeCounts(rows []row) []int {
	var out []int
	for _, r := range rows {
		if !slices.Contains(out, r.nodes) {
			out = append(out, r.nodes)
		}
	}
	slices.Sort(out)
	return out
}
