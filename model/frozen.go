package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Frozen is a Service, EndpointSlice or Pod encoded into one string: a
// few dozen bytes per endpoint and one allocation, where the struct takes
// about 150 bytes per endpoint in several. The Kubernetes source keeps
// every object it watches frozen, and the zone actors keep what they are
// built from frozen too (the same strings), thawing it only to build a
// zone. Why: a replica holds tens of thousands of these for as long as
// their zones live, and every small allocation that outlives its
// neighbours keeps a span of the heap from being returned when zones are
// handed to another replica.
//
// The identity (namespace, name, resourceVersion) is not encoded: its
// holder keeps it, and gives it back to Thaw. The encoding is private to
// the process: varints, length-prefixed strings, and addresses as a
// length byte and 4 or 16 bytes. Replicas also hand zones to each other
// in it (wire.ZoneState), so any change to it must change FrozenFormat.
type Frozen string

// FrozenFormat is the version of Frozen's encoding. A replica refuses a
// zone handed over in another: a rolling upgrade that changes the
// encoding then loads gained zones from the API server only.
const FrozenFormat = 3

// errFrozen reports a frozen object that cannot be decoded; only a bug
// can make one, since the process wrote it.
var errFrozen = errors.New("frozen object is truncated or malformed")

// Freeze encodes a *Service, *EndpointSlice, *Pod, *ServiceImport or
// *MultiClusterSlice; ok is false for any other value.
func Freeze(obj any) (f Frozen, ok bool) {
	b, ok := AppendFrozen(nil, obj)
	return Frozen(b), ok
}

// AppendFrozen appends the encoding of a *Service, *EndpointSlice, *Pod,
// *ServiceImport or *MultiClusterSlice to b; ok is false, and b returned as it was, for any other value.
func AppendFrozen(b []byte, obj any) (_ []byte, ok bool) {
	switch o := obj.(type) {
	case *Service:
		b = append(b, byte(KindService), byte(o.Type), serviceFlags(o))
		b = appendAddrs(b, o.ClusterIPs)
		b = appendString(b, o.ExternalName)
		b = appendPorts(b, o.Ports)
		// Last and only when present: a service without external IPs or
		// ingress hostnames costs no byte more than before they were kept.
		if len(o.ExternalIPs) > 0 || len(o.ExternalHosts) > 0 {
			b = appendAddrs(b, o.ExternalIPs)
		}
		if len(o.ExternalHosts) > 0 {
			b = binary.AppendUvarint(b, uint64(len(o.ExternalHosts)))
			for _, h := range o.ExternalHosts {
				b = appendString(b, h.Name)
				b = binary.AppendUvarint(b, uint64(h.After))
			}
		}
	case *EndpointSlice:
		b = append(b, byte(KindEndpointSlice))
		b = appendString(b, o.ServiceName)
		b = appendSlice(b, o)
	case *Pod:
		b = append(b, byte(KindPod))
		b = appendAddrs(b, o.IPs)
	case *ServiceImport:
		headless := byte(0)
		if o.Headless {
			headless = 1
		}
		b = append(b, byte(KindServiceImport), headless)
		b = appendAddrs(b, o.IPs)
		b = appendPorts(b, o.Ports)
	case *MultiClusterSlice:
		// The service name first, as an EndpointSlice's, so ServiceName
		// reads both kinds alike.
		b = append(b, byte(KindMultiClusterSlice))
		b = appendString(b, o.ServiceName)
		b = appendString(b, o.ClusterID)
		b = appendSlice(b, &o.EndpointSlice)
	default:
		return b, false
	}
	return b, true
}

// Kind is the kind of the frozen object; 0 when f is empty.
func (f Frozen) Kind() Kind {
	if f == "" {
		return 0
	}
	return Kind(f[0])
}

// appendSlice appends the ports and endpoints of an EndpointSlice.
func appendSlice(b []byte, o *EndpointSlice) []byte {
	b = appendPorts(b, o.Ports)
	b = binary.AppendUvarint(b, uint64(len(o.Endpoints)))
	for _, e := range o.Endpoints {
		ready := byte(0)
		if e.Ready {
			ready = 1
		}
		b = append(b, ready)
		b = appendString(b, e.Hostname)
		b = appendString(b, e.TargetPodName)
		b = appendAddrs(b, e.Addresses)
		b = appendString(b, e.Zone)
		b = binary.AppendUvarint(b, uint64(len(e.ForZones)))
		for _, z := range e.ForZones {
			b = appendString(b, z)
		}
	}
	return b
}

// The bits of a Service's flags byte (format 3).
const flagPreferClose = 1

func serviceFlags(o *Service) byte {
	if o.PreferClose {
		return flagPreferClose
	}
	return 0
}

// ServiceName is the service a frozen EndpointSlice or MultiClusterSlice
// belongs to, read without thawing it: "" for any other kind, or for
// damaged bytes.
func (f Frozen) ServiceName() string {
	d := decoder{s: string(f)}
	if k := Kind(d.byte()); k != KindEndpointSlice && k != KindMultiClusterSlice {
		return ""
	}
	return d.string()
}

// Thaw decodes f into a new *Service, *EndpointSlice, *Pod,
// *ServiceImport or *MultiClusterSlice with the
// identity given. Its strings share f's bytes; its lists are a few
// allocations, made for the caller alone.
func (f Frozen) Thaw(namespace, name, resourceVersion string) (any, error) {
	d := decoder{s: string(f)}
	switch Kind(d.byte()) {
	case KindService:
		o := &Service{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}
		o.Type = ServiceType(d.byte())
		o.PreferClose = d.byte()&flagPreferClose != 0
		o.ClusterIPs = d.addrs()
		o.ExternalName = d.string()
		o.Ports = d.ports()
		if d.more() {
			o.ExternalIPs = d.addrs()
		}
		if d.more() {
			o.ExternalHosts = d.hosts(len(o.ExternalIPs))
		}
		return o, d.done()
	case KindEndpointSlice:
		o := &EndpointSlice{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}
		o.ServiceName = d.string()
		d.slice(o)
		return o, d.done()
	case KindPod:
		o := &Pod{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}
		o.IPs = d.addrs()
		return o, d.done()
	case KindServiceImport:
		o := &ServiceImport{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}
		o.Headless = d.byte() == 1
		o.IPs = d.addrs()
		o.Ports = d.ports()
		return o, d.done()
	case KindMultiClusterSlice:
		o := &MultiClusterSlice{EndpointSlice: EndpointSlice{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}}
		o.ServiceName = d.string()
		o.ClusterID = d.string()
		d.slice(&o.EndpointSlice)
		return o, d.done()
	}
	return nil, fmt.Errorf("model: %w", errFrozen)
}

// slice reads what appendSlice wrote into o.
func (d *decoder) slice(o *EndpointSlice) {
	o.Ports = d.ports()
	n := d.count()
	o.Endpoints = make([]Endpoint, 0, n)
	// The endpoints' addresses share one array (an endpoint has one
	// address, as a rule): one allocation where there were n.
	addrs := make([]netip.Addr, 0, n)
	for range n {
		e := Endpoint{Ready: d.byte() == 1}
		e.Hostname = d.string()
		e.TargetPodName = d.string()
		start := len(addrs)
		addrs = d.appendAddrs(addrs)
		if len(addrs) > start {
			e.Addresses = addrs[start:len(addrs):len(addrs)]
		}
		e.Zone = d.string()
		e.ForZones = list(d, d.string)
		o.Endpoints = append(o.Endpoints, e)
	}
}

// Protocols as one byte; 0 is followed by the protocol's name.
var protocolCodes = []string{1: "TCP", 2: "UDP", 3: "SCTP"}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendAddrs(b []byte, addrs []netip.Addr) []byte {
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	for _, a := range addrs {
		raw := a.AsSlice() // conversions unmap; an invalid address (length 0) never thaws
		b = append(b, byte(len(raw)))
		b = append(b, raw...)
	}
	return b
}

func appendPorts(b []byte, ports []Port) []byte {
	b = binary.AppendUvarint(b, uint64(len(ports)))
	for _, p := range ports {
		b = appendString(b, p.Name)
		code := 0
		for i, name := range protocolCodes {
			if i > 0 && name == p.Protocol {
				code = i
			}
		}
		b = append(b, byte(code))
		if code == 0 {
			b = appendString(b, p.Protocol)
		}
		b = binary.AppendUvarint(b, uint64(uint32(p.Port)))
	}
	return b
}

// decoder reads a frozen object; the first error sticks and every later
// read returns a zero value.
type decoder struct {
	s   string
	off int
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errFrozen
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.s) {
		d.fail()
		return 0
	}
	d.off++
	return d.s[d.off-1]
}

// uvarint reads what binary.AppendUvarint wrote.
func (d *decoder) uvarint() uint64 {
	var v uint64
	for shift := 0; d.err == nil; shift += 7 {
		if shift > 63 {
			d.fail()
			break
		}
		c := d.byte()
		if shift == 63 && c > 1 {
			d.fail()
			break
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	return 0
}

// count reads a length that the remaining bytes can hold, each element
// taking at least one byte, so a corrupt count cannot ask for a huge
// allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.s)-d.off) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	s := d.s[d.off : d.off+n]
	d.off += n
	return s
}

// list reads a count and that many elements with one; nil when there are
// none or when the bytes are corrupt.
func list[T any](d *decoder, one func() T) []T {
	n := d.count()
	if n == 0 {
		return nil
	}
	out := make([]T, 0, n)
	for range n {
		v := one()
		if d.err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

func (d *decoder) addrs() []netip.Addr {
	return d.appendAddrs(nil)
}

// appendAddrs reads a list of addresses onto out; on corrupt bytes out
// is returned as it was.
func (d *decoder) appendAddrs(out []netip.Addr) []netip.Addr {
	n, before := d.count(), len(out)
	for range n {
		a := d.addr()
		if d.err != nil {
			return out[:before]
		}
		out = append(out, a)
	}
	return out
}

func (d *decoder) addr() netip.Addr {
	size := int(d.byte())
	if d.err != nil || (size != 4 && size != 16) || d.off+size > len(d.s) {
		d.fail()
		return netip.Addr{}
	}
	raw := d.s[d.off : d.off+size]
	d.off += size
	if size == 4 {
		return netip.AddrFrom4([4]byte{raw[0], raw[1], raw[2], raw[3]})
	}
	var a16 [16]byte
	copy(a16[:], raw)
	return netip.AddrFrom16(a16)
}

func (d *decoder) ports() []Port {
	return list(d, func() Port {
		p := Port{Name: d.string()}
		code := int(d.byte())
		switch {
		case code == 0:
			p.Protocol = d.string()
		case code < len(protocolCodes):
			p.Protocol = protocolCodes[code]
		default:
			d.fail()
		}
		port := d.uvarint()
		if port > 65535 {
			d.fail()
		}
		p.Port = int32(port)
		return p
	})
}

// done reports a decoding error, or bytes left over.
func (d *decoder) done() error {
	if d.err == nil && d.off != len(d.s) {
		d.err = errFrozen
	}
	if d.err != nil {
		return fmt.Errorf("model: %w", d.err)
	}
	return nil
}

// more reports whether bytes are left to read, for a field written only
// when it has a value.
func (d *decoder) more() bool { return d.err == nil && d.off < len(d.s) }

// hosts reads a Service's ingress hostnames; each must come after at most
// ips external IPs and no sooner than the one before it, the order the
// source wrote, so a damaged list fails rather than reorders.
func (d *decoder) hosts(ips int) []ExternalHost {
	n := d.count()
	if d.err != nil || n == 0 {
		d.fail()
		return nil
	}
	out := make([]ExternalHost, 0, n)
	for range n {
		name := d.string()
		after := d.uvarint()
		if d.err != nil || name == "" || after > uint64(ips) || (len(out) > 0 && int(after) < out[len(out)-1].After) {
			d.fail()
			return nil
		}
		out = append(out, ExternalHost{Name: name, After: int(after)})
	}
	return out
}
