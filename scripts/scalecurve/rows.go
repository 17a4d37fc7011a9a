package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
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

// parse reads the TSV: a header naming the columns (others are
// ignored, so the bench may add some), then one row a line.
func parse(in io.Reader) ([]row, error) {
	sc := bufio.NewScanner(in)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no header line")
	}
	header := strings.Split(sc.Text(), "\t")
	at := map[string]int{}
	for _, c := range columns {
		i := slices.Index(header, c)
		if i < 0 {
			return nil, fmt.Errorf("header has no column %q", c)
		}
		at[c] = i
	}
	var rows []row
	for line := 2; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		r, err := parseRow(strings.Split(sc.Text(), "\t"), at, len(header))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no rows after the header")
	}
	return rows, nil
}

func parseRow(f []string, at map[string]int, width int) (row, error) {
	if len(f) != width {
		return row{}, fmt.Errorf("%d fields, the header has %d", len(f), width)
	}
	r := row{server: f[at["server"]], watch: f[at["watch"]]}
	var err error
	number := func(c string) float64 {
		v, e := strconv.ParseFloat(f[at[c]], 64)
		if e != nil || v < 0 {
			err = fmt.Errorf("%s %q is not a number ≥ 0", c, f[at[c]])
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
