package zone

import (
	"fmt"
	"slices"

	"github.com/miekg/dns"
)

// ExternalPart is one namespace's part of a transfer of an external zone
// and where it comes from: this replica's snapshot (Done from the
// start), or one of the replicas in Remote, whose answer fills Records
// and sets Done. A part that stays not Done fails the whole transfer:
// a zone with a namespace missing is never sent.
type ExternalPart struct {
	Namespace string
	Key       string   // the namespace's service zone
	Remote    []string // the replicas to ask, in order, when not Done
	Records   []dns.RR
	Done      bool
}

// ExternalPartName is the name a replica asks another for namespace ns's
// part of a transfer of external zone z (with type AXFR).
func ExternalPartName(ns, z string) string { return ns + "." + z }

// PlanExternalTransfer lays out a transfer of external zone z: its head
// (ExternalTransferHead) and one part per namespace in name order, those
// held here already filled. ok is false when z is not an external zone's
// origin. A namespace whose service zone is placed nowhere has no
// records and adds nothing; one placed but with no replica able to serve
// it keeps an empty Remote, so the transfer fails.
func PlanExternalTransfer(cfg *Config, v Reader, z string) (head []dns.RR, parts []ExternalPart, ok bool) {
	if cfg.External == nil || !slices.Contains(cfg.Domains.External, z) || len(cfg.Domains.Cluster) == 0 {
		return nil, nil, false
	}
	dir := v.Directory()
	head = ExternalTransferHead(cfg, dir, z)
	if head == nil {
		return nil, nil, false
	}
	for _, ns := range sortedKeys(dir.Namespaces) {
		p := ExternalPart{Namespace: ns, Key: ServiceZoneKey(ns, cfg.Domains.Cluster[0])}
		if s := v.Zone(p.Key); s != nil && !v.Loading(p.Key) {
			p.Records, p.Done = s.ExternalTransferPart(cfg, z, ns), true
		} else if p.Remote = v.Remote(p.Key); p.Remote == nil && !v.Loading(p.Key) {
			p.Done = true // no records anywhere
		}
		parts = append(parts, p)
	}
	return head, parts, true
}

// AssembleExternalTransfer is the records of a transfer in the order they
// are sent: the head, every part in turn, and the SOA again. It fails,
// naming the first, when a part is not Done.
func AssembleExternalTransfer(head []dns.RR, parts []ExternalPart) ([]dns.RR, error) {
	if len(head) == 0 {
		return nil, fmt.Errorf("zone: a transfer without its SOA")
	}
	n := len(head) + 1
	for _, p := range parts {
		if !p.Done {
			return nil, fmt.Errorf("zone: namespace %s: no replica holding it answered", p.Namespace)
		}
		n += len(p.Records)
	}
	out := make([]dns.RR, 0, n)
	out = append(out, head...)
	for _, p := range parts {
		out = append(out, p.Records...)
	}
	return append(out, head[0]), nil
}

// ExternalPartAt answers another replica asking for namespace ns's part
// of a transfer of external zone z (name is ExternalPartName(ns, z)):
// the records, and whether this replica holds the namespace's service
// zone (complete) to give them, or would if it had records.
func ExternalPartAt(cfg *Config, v Reader, name string) (rrs []dns.RR, held bool) {
	if cfg.External == nil || len(cfg.Domains.Cluster) == 0 {
		return nil, false
	}
	z := cfg.Domains.externalZone(name)
	if z == "" || len(name) <= len(z) {
		return nil, false
	}
	ns, rest := lastLabel(name[:len(name)-len(z)])
	if rest != "" || ns == "" {
		return nil, false
	}
	key := ServiceZoneKey(ns, cfg.Domains.Cluster[0])
	switch s := v.Zone(key); {
	case v.Loading(key):
		return nil, false
	case s != nil:
		return s.ExternalTransferPart(cfg, z, ns), true
	case v.Remote(key) == nil && v.Directory().HasNamespace(ns):
		// Placed here, with no records to hold (a namespace without
		// Services): an empty part, as its names are NXDOMAIN here.
		return nil, true
	}
	return nil, false
}

// ExternalPartError is the error an owner's reply m to ExternalPartAt's
// question stands for: nil when it holds the part, else its rcode and
// the owner's reason (an extended DNS error), such as a part too large
// for one message.
func ExternalPartError(m *dns.Msg) error {
	if m.Rcode == dns.RcodeSuccess {
		return nil
	}
	why := ""
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				why = ": " + e.ExtraText
			}
		}
	}
	return fmt.Errorf("zone: the owner's part: %s%s", dns.RcodeToString[m.Rcode], why)
}
