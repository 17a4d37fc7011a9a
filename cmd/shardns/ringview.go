package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shardns/shardns/httpapi"
)

// The terminal picture of /debug/ring (`shardns ring --view`), drawn by
// a pure function of the ring so it is tested on fixed JSON: per member
// a line saying what it is, a bar with a cell per zone it owns, and the
// zones themselves; then this replica's handoffs. Every mark is a
// character as well as a colour, so the picture reads the same in a log.

// Marks of a zone in the bars and lists.
const (
	markPrimary = "█" // asked first among its owners
	markReplica = "▒" // a further owner
	markGrace   = "»" // lost, held here through the grace period
	markLoading = "+" // gained, loading here
)

// ANSI sequences used when ringViewStyle.Color is set.
const (
	ansiHome    = "\x1b[H\x1b[2J"
	ansiReset   = "\x1b[0m"
	ansiBold    = "\x1b[1m"
	ansiDim     = "\x1b[2m"
	ansiError   = "\x1b[1;37;41m"
	ansiPrimary = "\x1b[32m"
	ansiGrace   = "\x1b[35m"
	ansiLoading = "\x1b[34m"
	ansiDown    = "\x1b[31m"
	ansiPending = "\x1b[33m"
)

// ringViewStyle is how the picture is drawn.
type ringViewStyle struct {
	Color bool // ANSI colours (a terminal)
	Width int  // columns to fit in; bars are scaled down to fit
}

// ownedZone is one zone in a member's list.
type ownedZone struct {
	key     string
	primary bool
}

// renderRingView draws r on w.
func renderRingView(w io.Writer, r httpapi.Ring, style ringViewStyle) error {
	if style.Width < 40 {
		style.Width = 40
	}
	p := &picture{style: style}
	owned, order := zonesByOwner(r)
	most := 0
	for _, zs := range owned {
		most = max(most, len(zs))
	}
	grace := len(r.Grace)
	handoffs := grace + len(r.Loading)
	rf := "every member owns every zone"
	if r.Replication > 0 {
		rf = fmt.Sprintf("replicationFactor %d", r.Replication)
	}
	p.line(p.paint(ansiBold, "ring as seen by "+sanitize(r.Self)) +
		fmt.Sprintf(": %d members, %d zones, %s, %d handoffs in flight here", len(r.Members), len(r.Zones), rf, handoffs))
	p.line(fmt.Sprintf("%s asked first  %s further owner  %s held here in its grace period  %s loading here",
		p.paint(ansiPrimary, markPrimary), markReplica, p.paint(ansiGrace, markGrace), p.paint(ansiLoading, markLoading)))
	// One bar cell stands for scale zones, so the longest bar fits (each
	// of its four segments may round up a cell).
	barWidth := style.Width - 8
	scale := max(1, (most+grace+barWidth-1)/barWidth)
	members := map[string]httpapi.Member{}
	for _, m := range r.Members {
		members[m.Name] = m
	}
	loading := set(r.Loading)
	for _, name := range order {
		zs := owned[name]
		p.line("")
		p.line(p.memberLine(r, name, members, zs))
		var count barCounts
		for _, z := range zs {
			switch {
			case name == r.Self && loading[z.key]:
				count.loading++
			case z.primary:
				count.primary++
			default:
				count.replica++
			}
		}
		if name == r.Self {
			count.grace = len(r.Grace)
		}
		if count == (barCounts{}) {
			continue
		}
		p.line("  " + p.bar(count, scale))
		var items []string
		for _, z := range zs {
			items = append(items, p.zoneMark(z, name == r.Self && loading[z.key])+" "+sanitize(z.key))
		}
		if name == r.Self {
			for _, k := range r.Grace {
				items = append(items, p.paint(ansiGrace, markGrace)+" "+sanitize(k))
			}
		}
		p.wrap("    ", items)
	}
	if scale > 1 {
		p.line("")
		p.line(fmt.Sprintf("(a bar cell is %d zones)", scale))
	}
	p.line("")
	p.handoffs(r)
	_, err := io.WriteString(w, p.b.String())
	return err
}

// picture accumulates the lines drawn.
type picture struct {
	b     strings.Builder
	style ringViewStyle
}

func (p *picture) line(s string) { p.b.WriteString(s + "\n") }

// paint colours s when the style has colours.
func (p *picture) paint(code, s string) string {
	if !p.style.Color || s == "" {
		return s
	}
	return code + s + ansiReset
}

// memberLine says what a member is: role, state, address, zones owned.
func (p *picture) memberLine(r httpapi.Ring, name string, members map[string]httpapi.Member, zs []ownedZone) string {
	label := sanitize(name)
	if name == r.Self {
		label += " (this replica)"
	}
	first := 0
	for _, z := range zs {
		if z.primary {
			first++
		}
	}
	counts := fmt.Sprintf("%d zones, %d asked first", len(zs), first)
	m, live := members[name]
	if !live {
		return p.paint(ansiBold, label) + "  listed as an owner, not a live member  " + counts
	}
	role, state, colour := memberRoleState(m)
	remote := m.Remote
	if remote == "" {
		remote = "-"
	}
	return fmt.Sprintf("%s  %s, %s  remote %s  %s", p.paint(ansiBold, label), role, p.paint(colour, state), sanitize(remote), counts)
}

// memberRoleState names what m is and the state it is in, as the page
// does.
func memberRoleState(m httpapi.Member) (role, state, colour string) {
	role = "node-local cache"
	if m.Owner || m.Pending {
		role = "replica"
	}
	switch {
	case m.Down:
		return role, "down (its remote port refuses connections)", ansiDown
	case m.Owner:
		return role, "owner", ansiPrimary
	case m.Pending:
		return role, "syncing, not announced yet", ansiPending
	}
	return role, "owns nothing", ansiDim
}

// zoneMark is the mark of z in its owner's bar and list.
func (p *picture) zoneMark(z ownedZone, loadingHere bool) string {
	switch {
	case loadingHere:
		return p.paint(ansiLoading, markLoading)
	case z.primary:
		return p.paint(ansiPrimary, markPrimary)
	}
	return markReplica
}

// barCounts are a member's zones by their mark.
type barCounts struct{ primary, replica, loading, grace int }

// bar draws count as segments of marks, in the order of the legend, a
// cell for each scale zones or part of it.
func (p *picture) bar(count barCounts, scale int) string {
	cells := func(n int) int { return (n + scale - 1) / scale }
	return p.paint(ansiPrimary, strings.Repeat(markPrimary, cells(count.primary))) +
		strings.Repeat(markReplica, cells(count.replica)) +
		p.paint(ansiLoading, strings.Repeat(markLoading, cells(count.loading))) +
		p.paint(ansiGrace, strings.Repeat(markGrace, cells(count.grace)))
}

// wrap writes items after indent, as many to a line as fit.
func (p *picture) wrap(indent string, items []string) {
	line, width := indent, utf8.RuneCountInString(indent)
	for _, it := range items {
		w := visibleWidth(it)
		if width > len(indent) && width+2+w > p.style.Width {
			p.line(line)
			line, width = indent, len(indent)
		}
		if width > len(indent) {
			line += "  "
			width += 2
		}
		line += it
		width += w
	}
	if width > len(indent) {
		p.line(line)
	}
}

// handoffs lists the zones this replica hands over or loads.
func (p *picture) handoffs(r httpapi.Ring) {
	if len(r.Grace)+len(r.Loading) == 0 {
		p.line("no handoff in flight here: every zone this replica holds, it owns, and all have loaded")
		return
	}
	p.line(p.paint(ansiBold, "handoffs in flight here"))
	for _, k := range r.Grace {
		p.line(fmt.Sprintf("  %s %s  lost, held through the grace  %s -> %s", p.paint(ansiGrace, markGrace),
			sanitize(k), sanitize(r.Self), sanitizeAll(r.Zones[k])))
	}
	for _, k := range r.Loading {
		var from []string
		for _, o := range r.Zones[k] {
			if o != r.Self {
				from = append(from, o)
			}
		}
		p.line(fmt.Sprintf("  %s %s  gained, loading  %s -> %s", p.paint(ansiLoading, markLoading),
			sanitize(k), sanitizeAll(from), sanitize(r.Self)))
	}
}

// zonesByOwner lists, for each member and each other owner named in
// r.Zones, the zones it owns in key order; order is r.Members' order
// then the other owners by name.
func zonesByOwner(r httpapi.Ring) (map[string][]ownedZone, []string) {
	owned := map[string][]ownedZone{}
	var order, others []string
	for _, m := range r.Members {
		if _, dup := owned[m.Name]; !dup {
			owned[m.Name] = nil
			order = append(order, m.Name)
		}
	}
	keys := make([]string, 0, len(r.Zones))
	for k := range r.Zones {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for i, o := range r.Zones[k] {
			if _, known := owned[o]; !known {
				others = append(others, o)
			}
			owned[o] = append(owned[o], ownedZone{key: k, primary: i == 0})
		}
	}
	slices.Sort(others)
	return owned, append(order, others...)
}

func set(keys []string) map[string]bool {
	s := make(map[string]bool, len(keys))
	for _, k := range keys {
		s[k] = true
	}
	return s
}

// sanitize shows s's unprintable characters as escapes: names come from
// the cluster, and an escape sequence in one must not drive the
// terminal.
func sanitize(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case !unicode.IsPrint(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func sanitizeAll(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = sanitize(n)
	}
	return strings.Join(out, ", ")
}

// visibleWidth is the number of runes of s outside ANSI sequences.
func visibleWidth(s string) int {
	n, esc := 0, false
	for _, r := range s {
		switch {
		case esc:
			esc = r != 'm'
		case r == 0x1b:
			esc = true
		default:
			n++
		}
	}
	return n
}
