package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shardns/shardns/scripts/internal/benchtsv"
)

// Layout of the drawing, in SVG user units: three panels side by side,
// the legend below them.
const (
	panelWidth, panelHeight = 260, 240
	panelGap                = 80
	marginLeft, marginTop   = 60, 50
	width                   = marginLeft + 3*panelWidth + 2*panelGap + 20
	height                  = marginTop + panelHeight + 100
	peakTarget              = 0.2 // the largest replica's peak ÷ CoreDNS's at N = 6
)

// point is one value of a series at a number of services.
type point struct {
	services int
	value    float64
}

// panel is one chart: a title, a y unit, and its series by name.
type panel struct {
	title, unit string
	series      map[string][]point
	target      float64 // a dashed line across, if > 0
}

// render draws the rows as an SVG document.
func render(rows []row) string {
	peak, steady := panel{title: "Peak RSS (VmHWM), largest replica", unit: "MB", series: map[string][]point{}},
		panel{title: "Steady RSS, largest replica", unit: "MB", series: map[string][]point{}}
	ratio := panel{title: "Largest peak ÷ CoreDNS's peak", unit: "×", series: map[string][]point{}, target: peakTarget}
	core := map[int]float64{}
	for _, r := range rows {
		peak.series[r.series()] = put(peak.series[r.series()], point{r.services, r.peak})
		steady.series[r.series()] = put(steady.series[r.series()], point{r.services, r.steady})
		if r.server == "coredns" {
			core[r.services] = r.peak
		}
	}
	for _, r := range rows {
		if c := core[r.services]; r.server != "coredns" && c > 0 {
			ratio.series[r.series()] = put(ratio.series[r.series()], point{r.services, r.peak / c})
		}
	}
	xMax := 0
	for _, r := range rows {
		xMax = max(xMax, r.services)
	}
	yMax := benchtsv.NiceCeil(max(maxValue(peak), maxValue(steady)))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">shardns replicas (replicationFactor 1) beside one CoreDNS, services × 10 endpoints</text>`+"\n", marginLeft)
	for i, p := range []panel{peak, steady, ratio} {
		top := yMax
		if p.unit == "×" {
			top = benchtsv.NiceCeil(max(maxValue(p), p.target))
		}
		drawPanel(&b, marginLeft+i*(panelWidth+panelGap), p, xMax, top)
	}
	drawLegend(&b, names(peak))
	b.WriteString("</svg>\n")
	return b.String()
}

// put adds p to a series, replacing a value at the same size (a later
// run of the same point).
func put(s []point, p point) []point {
	if i := slices.IndexFunc(s, func(q point) bool { return q.services == p.services }); i >= 0 {
		s[i] = p
		return s
	}
	s = append(s, p)
	slices.SortFunc(s, func(a, b point) int { return a.services - b.services })
	return s
}

func maxValue(p panel) float64 {
	m := 0.0
	for _, s := range p.series {
		for _, q := range s {
			m = max(m, q.value)
		}
	}
	return m
}

// names are a panel's series in the legend's order: CoreDNS first.
func names(p panel) []string {
	var out []string
	for name := range p.series {
		out = append(out, name)
	}
	slices.SortFunc(out, func(a, b string) int {
		if (a == "CoreDNS") != (b == "CoreDNS") {
			if a == "CoreDNS" {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

// colour is a series' colour, by replica count.
func colour(name string) string {
	switch {
	case strings.HasPrefix(name, "N=3 "):
		return "#1f77b4"
	case strings.HasPrefix(name, "N=6 "):
		return "#d62728"
	case strings.HasPrefix(name, "N="):
		return "#2ca02c"
	}
	return "#222222"
}

// style is a series' stroke: dashes for watches of everything.
func style(name string) string {
	dash := ""
	if strings.HasSuffix(name, " unsharded") {
		dash = ` stroke-dasharray="6 4"`
	}
	return fmt.Sprintf(`stroke="%s" fill="none" stroke-width="2"%s`, colour(name), dash)
}

func drawPanel(b *strings.Builder, left int, p panel, xMax int, yMax float64) {
	bottom := marginTop + panelHeight
	x := func(services int) float64 { return float64(left) + float64(services)/float64(xMax)*panelWidth }
	y := func(v float64) float64 { return float64(bottom) - v/yMax*panelHeight }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", left, marginTop-12, p.title)
	fmt.Fprintf(b, `<path d="M%d %d V%d H%d" stroke="black" fill="none"/>`+"\n", left, marginTop, bottom, left+panelWidth)
	for i := range 6 {
		v := yMax * float64(i) / 5
		fmt.Fprintf(b, `<path d="M%d %.1f H%d" stroke="#dddddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, y(v), left+panelWidth, left-4, y(v)+4, tick(v, p.unit))
	}
	for _, s := range sizes(p) {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(s), bottom+14, thousands(s))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">services</text>`+"\n", left+panelWidth/2, bottom+30)
	if p.target > 0 {
		fmt.Fprintf(b, `<path d="M%d %.1f H%d" stroke="#d62728" stroke-dasharray="2 3"/><text x="%d" y="%.1f" fill="#d62728">target ≤ %g at N=6</text>`+"\n",
			left, y(p.target), left+panelWidth, left+4, y(p.target)-4, p.target)
	}
	for _, name := range names(p) {
		var pts []string
		for _, q := range p.series[name] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(q.services), y(q.value)))
		}
		fmt.Fprintf(b, `<polyline data-series="%s" points="%s" %s/>`+"\n", name, strings.Join(pts, " "), style(name))
		// Markers, so that a series of one size shows too.
		for _, q := range p.series[name] {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(q.services), y(q.value), colour(name))
		}
	}
}

// sizes are the distinct numbers of services of a panel, for the x ticks.
func sizes(p panel) []int {
	var out []int
	for _, s := range p.series {
		for _, q := range s {
			if !slices.Contains(out, q.services) {
				out = append(out, q.services)
			}
		}
	}
	slices.Sort(out)
	return out
}

func tick(v float64, unit string) string {
	if unit == "×" {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

func thousands(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func drawLegend(b *strings.Builder, names []string) {
	y := marginTop + panelHeight + 60
	for i, name := range names {
		x := marginLeft + i*170
		fmt.Fprintf(b, `<path d="M%d %d H%d" %s/><text x="%d" y="%d">%s</text>`+"\n", x, y, x+30, style(name), x+36, y+4, name)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555555">solid: sharded watches (ShardedListAndWatch); dashed: every replica watches everything</text>`+"\n",
		marginLeft, y+24)
}
