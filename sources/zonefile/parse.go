// Package zonefile is the source of authoritative zones read from RFC 1035
// zone files (the files: section of the configuration).
//
// Every replica reads every file and sends its zone to the zone manager,
// which keeps the origin in the directory and hands the records to the
// zone's owners only. The source keeps the bytes of the last good version
// of each file, not its records: a replay (a replica gaining zones)
// parses them again. A file is checked every interval; a change that does
// not parse is logged with its line and the last good version keeps
// serving.
package zonefile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/fsutil"
	"github.com/shardns/shardns/zone"
)

// Zone is one configured zone file.
type Zone struct {
	File string
	// Origin is the zone's name; "" takes it from the file ($ORIGIN, or
	// absolute names, and the SOA's owner).
	Origin string
	// TransferTo lists who may transfer the zone; empty: nobody.
	TransferTo []netip.Prefix
	// Key names the zone in errors: files.zones[i].
	Key string
}

// Reserved is a zone that file origins must stay out of (a cluster or
// reverse zone), with the configuration key that claims it.
type Reserved struct {
	Zone string // fully qualified, lower-case
	Key  string
}

// FromConfig returns the zone files of cfg, and the zones their origins
// must not overlap: the cluster and reverse zones, whose names the
// Kubernetes records own.
func FromConfig(cfg *config.Config) ([]Zone, []Reserved) {
	var zones []Zone
	for i, z := range cfg.Files.Zones {
		to := config.TransferPrefixes(z.TransferTo)
		zones = append(zones, Zone{File: z.File, Origin: z.Origin, TransferTo: to, Key: fmt.Sprintf("files.zones[%d]", i)})
	}
	var reserved []Reserved
	for i, z := range cfg.Kubernetes.Zones {
		if z == "." { // beside server blocks that answer their files alone (config checks it)
			continue
		}
		reserved = append(reserved, Reserved{Zone: zone.Fqdn(z), Key: fmt.Sprintf("kubernetes.zones[%d]", i)})
	}
	for i, z := range cfg.Kubernetes.ReverseZones {
		reserved = append(reserved, Reserved{Zone: zone.Fqdn(z), Key: fmt.Sprintf("kubernetes.reverseZones[%d]", i)})
	}
	return zones, reserved
}

// Parse reads the content of a zone file with miekg/dns's zone parser
// and checks it. A syntax error names the file and the line; a record
// the zone cannot hold is named by owner and type. $INCLUDE is refused:
// only the file itself is watched for changes.
func Parse(file, origin string, data []byte, transferTo []netip.Prefix) (*zone.FileZone, error) {
	if origin != "" {
		origin = dns.Fqdn(origin)
	}
	zp := dns.NewZoneParser(bytes.NewReader(data), origin, file)
	var rrs []dns.RR
	buf := make([]byte, dns.MaxMsgSize)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		// The parser accepts some records the wire cannot carry (a label
		// over 63 octets once escapes are decoded): such a record could
		// never be served, so the file is refused like any bad record.
		if _, err := dns.PackRR(rr, buf, 0, nil, false); err != nil {
			return nil, fmt.Errorf("%s: record %q cannot be sent on the wire: %v", file, rr.String(), err)
		}
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		var pe *dns.ParseError
		if origin == "" && errors.As(err, &pe) && strings.Contains(pe.Error(), "bad owner name") {
			// A relative name before any $ORIGIN.
			return nil, fmt.Errorf("%w (no origin is configured: names are relative to $ORIGIN in the file)", err)
		}
		return nil, err
	}
	if origin == "" {
		for _, rr := range rrs {
			if soa, ok := rr.(*dns.SOA); ok {
				origin = soa.Hdr.Name
				break
			}
		}
		if origin == "" {
			return nil, fmt.Errorf("%s: no SOA record, and no origin configured to name the zone", file)
		}
	}
	if origin != "." && !config.ValidDomain(origin) {
		// What the configuration accepts as a zone: the file's own SOA
		// may name anything.
		return nil, fmt.Errorf("%s: zone origin %q is not a domain name of letters, digits, hyphens and underscores", file, origin)
	}
	return zone.NewFileZone(origin, file, rrs, transferTo)
}

// file is the last good version of one zone file.
type file struct {
	cfg    Zone
	origin string // the zone's origin, fixed at start
	serial uint32
	data   []byte
	// The version last looked at, good or not: a file is read again when
	// its modification time or size differ.
	mod      time.Time
	size     int64
	settling fsutil.Settling // a changed file is read once whole
}

// Snapshot is what the source serves: the last good version of every
// file, and the zones parsed at start (sent once, then dropped).
type Snapshot struct {
	files   []*file
	initial []*zone.FileZone
}

// Len is the number of zones served.
func (s *Snapshot) Len() int { return len(s.files) }

// Load reads and parses every file. At start-up its error is fatal: it
// names the zone's key, the file and the line or record.
func Load(fsys fs.FS, zones []Zone, reserved []Reserved) (*Snapshot, error) {
	s := &Snapshot{}
	origins := map[string]string{}
	for _, z := range zones {
		st, err := fsutil.Stat(fsys, z.File)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", z.Key, err)
		}
		data, err := fsutil.ReadFile(fsys, z.File)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", z.Key, err)
		}
		f, err := Parse(z.File, z.Origin, data, z.TransferTo)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", z.Key, err)
		}
		if other, dup := origins[f.Origin]; dup {
			return nil, fmt.Errorf("%s (%s): origin %s is also the origin of %s", z.Key, z.File, f.Origin, other)
		}
		origins[f.Origin] = z.Key
		for _, r := range reserved {
			if zone.InZone(f.Origin, r.Zone) || zone.InZone(r.Zone, f.Origin) {
				return nil, fmt.Errorf("%s (%s): origin %s overlaps %s (%s): a file zone cannot share names with a cluster or reverse zone",
					z.Key, z.File, f.Origin, r.Key, r.Zone)
			}
		}
		s.files = append(s.files, &file{cfg: z, origin: f.Origin, serial: f.Serial, data: data,
			mod: st.ModTime(), size: st.Size()})
		s.initial = append(s.initial, f)
	}
	return s, nil
}
