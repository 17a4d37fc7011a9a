package kubernetes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/shardns/shardns/model"
)

// A replica keeps the model object of every Service, EndpointSlice and Pod
// it watches, because a zone it gains later is loaded from them (a replay
// reads no API). The objects of namespaces whose zones other replicas own
// are kept frozen: encoded into one byte slice of a few dozen bytes per
// endpoint, instead of a model object of about 150. They are thawed when
// an event or a replay needs them. Their identity (namespace, name,
// resourceVersion) stays in the cache entry, so it is not encoded.
//
// The encoding is private to the process: varints, length-prefixed
// strings, and addresses as a length byte and 4 or 16 bytes.

// errFrozen reports a frozen object that cannot be decoded; only a bug
// can make one, since the process wrote it.
var errFrozen = errors.New("frozen object is truncated or malformed")

// freeze encodes a *model.Service, *model.EndpointSlice or *model.Pod; any
// other value gives nil.
func freeze(obj any) []byte {
	var b []byte
	switch o := obj.(type) {
	case *model.Service:
		b = append(b, byte(model.KindService), byte(o.Type))
		b = appendAddrs(b, o.ClusterIPs)
		b = appendString(b, o.ExternalName)
		b = appendPorts(b, o.Ports)
	case *model.EndpointSlice:
		b = append(b, byte(model.KindEndpointSlice))
		b = appendString(b, o.ServiceName)
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
		}
	case *model.Pod:
		b = append(b, byte(model.KindPod))
		b = appendAddrs(b, o.IPs)
	default:
		return nil
	}
	// An exact copy: appending left up to twice the bytes in capacity, and
	// the copy is what stays for as long as the object lives.
	return append(make([]byte, 0, len(b)), b...)
}

// thaw decodes what freeze wrote, with the identity of entry c.
func thaw(c *cached, frozen []byte) (any, error) {
	d := decoder{b: frozen, s: string(frozen)} // one copy that every string shares
	switch model.Kind(d.byte()) {
	case model.KindService:
		o := &model.Service{Namespace: c.namespace, Name: c.name, ResourceVersion: c.resourceVersion}
		o.Type = model.ServiceType(d.byte())
		o.ClusterIPs = d.addrs()
		o.ExternalName = d.string()
		o.Ports = d.ports()
		return o, d.done()
	case model.KindEndpointSlice:
		o := &model.EndpointSlice{Namespace: c.namespace, Name: c.name, ResourceVersion: c.resourceVersion}
		o.ServiceName = d.string()
		o.Ports = d.ports()
		n := d.count()
		o.Endpoints = make([]model.Endpoint, 0, n)
		// The endpoints' addresses share one array (an endpoint has one
		// address, as a rule): one allocation where there were n.
		addrs := make([]netip.Addr, 0, n)
		for range n {
			e := model.Endpoint{Ready: d.byte() == 1}
			e.Hostname = d.string()
			e.TargetPodName = d.string()
			start := len(addrs)
			addrs = d.appendAddrs(addrs)
			if len(addrs) > start {
				e.Addresses = addrs[start:len(addrs):len(addrs)]
			}
			o.Endpoints = append(o.Endpoints, e)
		}
		return o, d.done()
	case model.KindPod:
		o := &model.Pod{Namespace: c.namespace, Name: c.name, ResourceVersion: c.resourceVersion}
		o.IPs = d.addrs()
		return o, d.done()
	}
	return nil, errFrozen
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
		raw := a.AsSlice() // unmapped by the conversion; invalid addresses are never kept
		b = append(b, byte(len(raw)))
		b = append(b, raw...)
	}
	return b
}

func appendPorts(b []byte, ports []model.Port) []byte {
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
	b   []byte
	s   string // the same bytes, for strings that share one allocation
	off int
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errFrozen
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.b) {
		d.fail()
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.off += n
	return v
}

// count reads a length that the remaining bytes can hold, each element
// taking at least one byte, so a corrupt count cannot ask for a huge
// allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)-d.off) {
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
	if d.err != nil || (size != 4 && size != 16) || d.off+size > len(d.b) {
		d.fail()
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(d.b[d.off : d.off+size])
	d.off += size
	return a
}

func (d *decoder) ports() []model.Port {
	return list(d, func() model.Port {
		p := model.Port{Name: d.string()}
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
	if d.err == nil && d.off != len(d.b) {
		d.err = errFrozen
	}
	if d.err != nil {
		return fmt.Errorf("kubernetes source: %w", d.err)
	}
	return nil
}
