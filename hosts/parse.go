package hosts

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Entry is one line of a hosts file: an address and its names (lower-case,
// fully qualified).
type Entry struct {
	Addr  netip.Addr
	Names []string
}

// ParseLine reads one /etc/hosts line: an IP address and one or more
// names, "#" starting a comment. ok is false for a blank or comment line.
func ParseLine(line string) (e Entry, ok bool, err error) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return e, false, nil
	}
	if len(f) < 2 {
		return e, false, fmt.Errorf("%q: want an IP address and at least one name", strings.TrimSpace(line))
	}
	addr, err := netip.ParseAddr(f[0])
	if err != nil {
		return e, false, fmt.Errorf("%q is not an IP address", f[0])
	}
	// A zone (fe80::1%eth0) means nothing in a DNS answer.
	e.Addr = addr.WithZone("")
	for _, n := range f[1:] {
		name := dns.Fqdn(strings.ToLower(n))
		if !hostName(name) {
			return e, false, fmt.Errorf("%q is not a host name", n)
		}
		e.Names = append(e.Names, name)
	}
	return e, true, nil
}

// Parse reads a hosts file. An error names source and the line.
func Parse(r io.Reader, source string) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		e, ok, err := ParseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", source, line, err)
		}
		if ok {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return out, nil
}

// hostName accepts what hosts(5) calls a host name (RFC 952 and 1123
// letters, digits and hyphens, and the underscores found in practice), as
// a lower-case, fully qualified name.
func hostName(name string) bool {
	if _, ok := dns.IsDomainName(name); !ok || name == "." || len(name) > 254 {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			if label == 0 || label > 63 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			label++
		default:
			return false
		}
	}
	return true
}
