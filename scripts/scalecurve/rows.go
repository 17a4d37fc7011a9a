package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/shardns/shardns/scripts/internal/benchtsv"
)

// row is one line of the bench's TSV: one server, or one set of
// replicas, at one size. Memory in MB.
type row struct {
	services     int
	server       string // shardns or coredns
	watch        string // sharded, unsharded; all for CoreDNS
	replicas     int
	steady, peak float64
}

// series names the line a row belongs to.
func (r row) series() string {
	if r.server == "coredns" {
		return "CoreDNS"
	}
	return fmt.Sprintf("N=%d %s", r.replicas, r.watch)
}

// columns the drawing needs, by the names of the bench's header.
var columns = []string{"services", "server", "watch", "replicas", "steady_rss_mb", "peak_rss_mb"}

// parse reads the bench's TSV (see benchtsv.Read).
func parse(in io.Reader) ([]row, error) {
	return benchtsv.Read(in, columns, parseRow)
}

func parseRow(rec benchtsv.Record) (row, error) {
	r := row{server: rec.Get("server"), watch: rec.Get("watch")}
	var err error
	number := func(c string) float64 {
		v, e := strconv.ParseFloat(rec.Get(c), 64)
		if e != nil || v < 0 {
			err = fmt.Errorf("%s %q is not a number ≥ 0", c, rec.Get(c))
		}
		return v
	}
	r.services, r.replicas = int(number("services")), int(number("replicas"))
	r.steady, r.peak = number("steady_rss_mb"), number("peak_rss_mb")
	if err == nil && r.services == 0 {
		err = fmt.Errorf("services is 0")
	}
	return r, err
}
