// Command scalecurve draws the scale curve of `make bench`
// (TestScaleCurve in integration/bench) as an SVG: the peak and the steady RSS of
// the largest replica, and of CoreDNS, against the number of services,
// for each replica count and watch kind, and the largest replica's peak
// as a share of CoreDNS's. It reads the bench's TSV on stdin and writes
// the SVG on stdout:
//
//	go run ./scripts/scalecurve < scale.tsv > docs/scale-curve.svg
//
// It uses the standard library (and the table reader of scripts/internal/benchtsv)
// only, so that the plot is redrawn from a bench's output without tools beside Go.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	rows, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalecurve:", err)
		os.Exit(1)
	}
	if _, err := io.WriteString(os.Stdout, render(rows)); err != nil {
		fmt.Fprintln(os.Stderr, "scalecurve:", err)
		os.Exit(1)
	}
}
