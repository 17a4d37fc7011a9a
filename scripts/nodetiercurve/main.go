// Command nodetiercurve draws what the replicas spend on the node-local
// tier (TestNodeTierScale in integration/bench, part of `make bench`) as an SVG:
// the replicas' CPU and RSS against the number of node-local caches, with
// invalidations and without, and the time from a change sent to the API
// to a node told of it. It reads the bench's TSV on stdin and writes the
// SVG on stdout:
//
//	go run ./scripts/nodetiercurve < bench-node-tier.tsv > docs/node-tier-scale.svg
//
// It uses the standard library and scripts/internal/benchtsv only, as scripts/scalecurve does.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	rows, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodetiercurve:", err)
		os.Exit(1)
	}
	if _, err := io.WriteString(os.Stdout, render(rows)); err != nil {
		fmt.Fprintln(os.Stderr, "nodetiercurve:", err)
		os.Exit(1)
	}
}
