package main

import (
	"fmt"
	"strings"

	"github.com/shardns/shardns/scripts/internal/benchtsv"
)

// Layout of the drawing, in SVG user units: three panels side by side,
// the legend below them.
const (
	panelWidth, panelHeight = 260, 220
	panelGap                = 80
	marginLeft, marginTop   = 60, 50
	width                   = marginLeft + 3*panelWidth + 2*panelGap + 20
	height                  = marginTop + panelHeight + 90
)

// series is one line: its name, colour and dash, and a value per node
// count (NaN: none).
type series struct {
	name, colour, dash string
	values             map[int]float64
}

// panel is one chart: a title, a y unit and its lines.
type panel struct {
	title, unit string
	lines       []series
}

// render draws the rows as an SVG document.
func render(rows []row) string {
	off := series{name: "invalidations off", colour: "#1f77b4", dash: "6 4", values: map[int]float64{}}
	on := series{name: "invalidations on", colour: "#d62728", values: map[int]float64{}}
	offRSS, onRSS := off, on
	offRSS.values, onRSS.values = map[int]float64{}, map[int]float64{}
	p50 := series{name: "p50", colour: "#2ca02c", values: map[int]float64{}}
	p99 := series{name: "p99", colour: "#9467bd", dash: "2 3", values: map[int]float64{}}
	for _, r := range rows {
		// With no node nothing is asked: the row is both lines' start.
		if !r.invalidations || r.nodes == 0 {
			off.values[r.nodes], offRSS.values[r.nodes] = r.cpu, r.rss
		}
		if r.invalidations {
			on.values[r.nodes], onRSS.values[r.nodes] = r.cpu, r.rss
			if r.nodes > 0 {
				p50.values[r.nodes], p99.values[r.nodes] = r.p50, r.p99
			}
		}
	}
	panels := []panel{
		{title: "CPU of the 3 replicas together", unit: "cores", lines: []series{off, on}},
		{title: "RSS of the 3 replicas together", unit: "MB", lines: []series{offRSS, onRSS}},
		{title: "Change sent to the API → node told", unit: "ms", lines: []series{p50, p99}},
	}
	xs := nodeCounts(rows)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">shardns replicas (3, replicationFactor 1) serving node-local caches, EndpointSlice churn</text>`+"\n", marginLeft)
	for i, p := range panels {
		drawPanel(&b, marginLeft+i*(panelWidth+panelGap), p, xs)
	}
	drawLegend(&b, []series{off, on, p50, p99})
	b.WriteString("</svg>\n")
	return b.String()
}

func stroke(s series) string {
	dash := ""
	if s.dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
	}
	return fmt.Sprintf(`stroke="%s" fill="none" stroke-width="2"%s`, s.colour, dash)
}

func drawPanel(b *strings.Builder, left int, p panel, xs []int) {
	bottom := marginTop + panelHeight
	xMax := 1
	if len(xs) > 0 {
		xMax = max(1, xs[len(xs)-1])
	}
	yMax := 0.0
	for _, s := range p.lines {
		for _, v := range s.values {
			yMax = max(yMax, v)
		}
	}
	yMax = benchtsv.NiceCeil(yMax)
	x := func(n int) float64 { return float64(left) + float64(n)/float64(xMax)*panelWidth }
	y := func(v float64) float64 { return float64(bottom) - v/yMax*panelHeight }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", left, marginTop-12, p.title)
	fmt.Fprintf(b, `<path d="M%d %d V%d H%d" stroke="black" fill="none"/>`+"\n", left, marginTop, bottom, left+panelWidth)
	for i := range 6 {
		v := yMax * float64(i) / 5
		fmt.Fprintf(b, `<path d="M%d %.1f H%d" stroke="#dddddd"/><text x="%d" y="%.1f" text-anchor="end">%s %s</text>`+"\n",
			left, y(v), left+panelWidth, left-4, y(v)+4, tick(v), p.unit)
	}
	for _, n := range xs {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n), bottom+14, n)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">node-local caches</text>`+"\n", left+panelWidth/2, bottom+30)
	for _, s := range p.lines {
		var pts []string
		for _, n := range xs {
			if v, ok := s.values[n]; ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(n), y(v)))
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(n), y(v), s.colour)
			}
		}
		fmt.Fprintf(b, `<polyline data-series="%s" points="%s" %s/>`+"\n", s.name, strings.Join(pts, " "), stroke(s))
	}
}

func tick(v float64) string {
	if v != 0 && v < 10 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func drawLegend(b *strings.Builder, lines []series) {
	y := marginTop + panelHeight + 60
	for i, s := range lines {
		x := marginLeft + i*170
		fmt.Fprintf(b, `<path d="M%d %d H%d" %s/><text x="%d" y="%d">%s</text>`+"\n", x, y, x+30, stroke(s), x+36, y+4, s.name)
	}
}
