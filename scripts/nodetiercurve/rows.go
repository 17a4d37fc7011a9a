package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
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

// parse reads the TSV: a header naming the columns (others are ignored,
// so the bench may add some), then one row a line.
func parse(in io.Reader) ([]row, error) {
	sc := bufio.NewScanner(in)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no header")
	}
	at := map[string]int{}
	for i, name := range strings.Split(sc.Text(), "\t") {
		at[name] = i
	}
	for _, c := range columns {
		if _, ok := at[c]; !ok {
			return nil, fmt.Errorf("no column %q", c)
		}
	}
	var rows []row
	for line := 2; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		r, err := parseRow(strings.Split(sc.Text(), "\t"), at)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

func parseRow(f []string, at map[string]int) (row, error) {
	get := func(name string) string {
		if i := at[name]; i < len(f) {
			return f[i]
		}
		return ""
	}
	var r row
	var err error
	if r.nodes, err = strconv.Atoi(get("nodes")); err != nil || r.nodes < 0 {
		return row{}, fmt.Errorf("nodes %q", get("nodes"))
	}
	if r.invalidations, err = strconv.ParseBool(get("invalidations")); err != nil {
		return row{}, fmt.Errorf("invalidations %q", get("invalidations"))
	}
	for _, v := range []struct {
		name string
		to   *float64
	}{{"replica_cpu", &r.cpu}, {"replica_rss_mb", &r.rss}, {"latency_p50_ms", &r.p50}, {"latency_p99_ms", &r.p99}} {
		x, err := strconv.ParseFloat(get(v.name), 64)
		if err != nil || x < 0 || x != x {
			return row{}, fmt.Errorf("%s %q", v.name, get(v.name))
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
