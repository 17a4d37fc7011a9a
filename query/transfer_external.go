package query

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// partsParallel bounds the namespaces' parts one transfer asks for at once.
const partsParallel = 8

// externalTransfer answers AXFR and IXFR of a k8s_external zone z, as
// CoreDNS's transfer plugin answers them from k8s_external: over TCP, to
// the addresses kubernetes.external.transferTo allows; an IXFR whose
// serial is the zone's or later gets the SOA alone. The namespaces' parts
// held here are read from this replica's snapshots; the others are asked
// of their owners off the listener's goroutine, within the time a
// question gets (Attempts × Timeout). If any namespace's part is not
// given the transfer fails with SERVFAIL: a zone with names missing is
// never sent.
func (h *Handler) externalTransfer(x *exchange, r *dns.Msg, z string, out []byte, refuse func(string) []byte) []byte {
	if !h.Config.External.TransferAllowed(x.t.Client.Addr()) {
		return refuse("the client is not in kubernetes.external.transferTo")
	}
	head, parts, ok := zone.PlanExternalTransfer(h.Config, h.Zones, z)
	if !ok {
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	x.zone = z
	serial := head[0].(*dns.SOA).Serial
	if x.req.Question[0].Qtype == dns.TypeIXFR && upToDate(x.req, serial) {
		return h.sendTransfer(x, r, head[:1], serial, out)
	}
	if !slices.ContainsFunc(parts, func(p zone.ExternalPart) bool { return !p.Done }) {
		return h.sendExternal(x, r, head, parts, serial, out)
	}
	return h.askParts(x, r, z, head, parts, serial, out)
}

// askParts asks for the parts held elsewhere on a goroutine of its own,
// counted as one question in flight, and sends the transfer late; nil.
// With no cluster to ask, or too many questions in flight, SERVFAIL now.
func (h *Handler) askParts(x *exchange, r *dns.Msg, z string, head []dns.RR, parts []zone.ExternalPart, serial uint32, out []byte) []byte {
	c := h.Cluster
	if c == nil || x.t.Late == nil || c.inflight.Add(1) > c.MaxInFlight {
		if c != nil && x.t.Late != nil {
			c.inflight.Add(-1)
		}
		h.logError(x, "an external zone's transfer", errors.New("namespaces held elsewhere cannot be asked now"))
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	go func() {
		defer c.inflight.Add(-1)
		h.collectParts(z, parts, time.Now().Add(time.Duration(c.Attempts)*c.Timeout))
		if b := h.sendExternal(x, r, head, parts, serial, nil); b != nil {
			x.t.Late.WriteLate(b, x.t.Client)
		}
	}()
	return nil
}

// sendExternal assembles the transfer and sends it, or SERVFAIL when a
// part is missing.
func (h *Handler) sendExternal(x *exchange, r *dns.Msg, head []dns.RR, parts []zone.ExternalPart, serial uint32, out []byte) []byte {
	rrs, err := zone.AssembleExternalTransfer(head, parts)
	if err != nil {
		h.logError(x, "an external zone's transfer", err)
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	return h.sendTransfer(x, r, rrs, serial, out)
}

// collectParts asks the owners of each part not held here, in their
// order, until one gives it or deadline passes; at most partsParallel at
// once.
func (h *Handler) collectParts(z string, parts []zone.ExternalPart, deadline time.Time) {
	c := h.Cluster
	sem := make(chan struct{}, partsParallel)
	var wg sync.WaitGroup
	for i := range parts {
		if parts[i].Done {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p := &parts[i]
			name := zone.ExternalPartName(p.Namespace, z)
			for _, member := range p.Remote {
				left := time.Until(deadline)
				if left <= 0 {
					return
				}
				m, _, err := c.ask(member, p.Key, name, dns.TypeAXFR, h.Config.OwnTopology(), min(c.Timeout, left), "")
				if err == nil {
					err = zone.ExternalPartError(m)
				}
				if err == nil {
					p.Records, p.Done = m.Answer, true
					return
				}
				if h.ErrorLog != nil {
					h.ErrorLog.Warn("a namespace's part of a transfer", "name", name, "replica", member, "error", err)
				}
			}
		})
	}
	wg.Wait()
}

// sendTransfer sends rrs, the records of a transfer of zone x.zone at
// serial, in messages: all but the last through x.t.Stream, the last
// returned (appended to out[:0]); nil when the connection broke.
func (h *Handler) sendTransfer(x *exchange, r *dns.Msg, rrs []dns.RR, serial uint32, out []byte) []byte {
	msgs, err := h.transferMessages(x, rrs)
	if err != nil {
		h.logError(x, "packing a zone transfer", err)
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	size := 0
	for _, m := range msgs[:len(msgs)-1] {
		if err := x.t.Stream.WriteStream(m); err != nil {
			h.logError(x, "sending a zone transfer", err)
			return nil // the connection is gone
		}
		size += len(m)
	}
	last := append(out[:0], msgs[len(msgs)-1]...)
	h.observe(x, dns.RcodeSuccess, size+len(last))
	if h.TransferLog != nil {
		h.TransferLog.LogAttrs(context.Background(), slog.LevelInfo, "zone transfer", slog.String("zone", x.zone),
			slog.String("client", addrString(x.t.Client)), slog.Uint64("serial", uint64(serial)),
			slog.Int("records", len(rrs)), slog.Int("messages", len(msgs)))
	}
	return last
}
