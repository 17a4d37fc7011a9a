// Package benchtsv reads the tab-separated tables that make bench's
// curves write (bench-scale.tsv, bench-node-tier.tsv) and holds what the
// commands drawing them share: the header that names the columns, and
// axes with round ticks.
package benchtsv

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
)

// Record is one row of a table, read by column name.
type Record struct {
	fields []string
	at     map[string]int
}

// Get is the field of the named column.
func (r Record) Get(column string) string {
	return r.fields[r.at[column]]
}

// Read reads a header naming the columns, then one record a line; blank
// lines are skipped. Columns beyond the needed ones are ignored, so that
// a bench may add some; a needed column missing from the header, or a
// record with another number of fields than the header, is an error.
// Each record is handed to parse, whose error is reported with its line.
func Read[T any](in io.Reader, needed []string, parse func(Record) (T, error)) ([]T, error) {
	sc := bufio.NewScanner(in)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no header line")
	}
	header := strings.Split(sc.Text(), "\t")
	at := map[string]int{}
	for i, name := range header {
		if _, dup := at[name]; !dup {
			at[name] = i
		}
	}
	for _, c := range needed {
		if _, ok := at[c]; !ok {
			return nil, fmt.Errorf("header has no column %q", c)
		}
	}
	var out []T
	for line := 2; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != len(header) {
			return nil, fmt.Errorf("line %d: %d fields, the header has %d", line, len(fields), len(header))
		}
		v, err := parse(Record{fields: fields, at: at})
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rows after the header")
	}
	return out, nil
}

// NiceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten, so that
// an axis's five ticks are round numbers.
func NiceCeil(v float64) float64 {
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}
