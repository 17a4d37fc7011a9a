package hosts

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"

	"github.com/shardns/shardns/config"
)

// Entry is one line of a hosts file: an address and its names (lower-case,
// fully qualified).
type Entry struct {
	Addr  netip.Addr
	Names []string
}

// ParseLine reads one /etc/hosts line: an IP address and one or more
// names, "#" starting a comment (config.ParseHostsLine, which checks
// hosts.entries). ok is false for a blank or comment line.
func ParseLine(line string) (e Entry, ok bool, err error) {
	e.Addr, e.Names, ok, err = config.ParseHostsLine(line)
	return e, ok, err
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
