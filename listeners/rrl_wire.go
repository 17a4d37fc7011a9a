package listeners

import "encoding/binary"

// Reading a response for response rate limiting: the class, and a hash
// of the name its account is kept under, straight from the wire bytes
// the listener is about to send, without unpacking or allocating.

const (
	typeSOA      = 6
	typeNS       = 2
	rcodeNXRR    = 3 // NXDOMAIN
	maxNameHops  = 16
	headerLength = 12
)

// classify returns the class of resp and the hash of its account's name:
// the question's name and type for answers and NODATA, the name alone for
// referrals, the zone (the authority's SOA owner, else the question) for
// NXDOMAIN, nothing for errors.
func classify(resp []byte, seed uint64) (RRLClass, uint64) {
	if len(resp) < headerLength {
		return RRLError, 0
	}
	rcode := resp[3] & 0x0f
	an := binary.BigEndian.Uint16(resp[6:])
	ns := binary.BigEndian.Uint16(resp[8:])
	if binary.BigEndian.Uint16(resp[4:]) != 1 || (rcode != 0 && rcode != rcodeNXRR) {
		return RRLError, 0
	}
	qname, end, ok := hashName(resp, headerLength, seed)
	if !ok || end+4 > len(resp) {
		return RRLError, 0
	}
	qtype := uint64(binary.BigEndian.Uint16(resp[end:]))
	withType := mix(qname ^ qtype<<48)
	off := end + 4
	switch {
	case rcode == rcodeNXRR:
		if zone, ok := authorityOwner(resp, off, an, ns, typeSOA, seed); ok {
			return RRLNXDomain, zone
		}
		return RRLNXDomain, qname
	case an > 0:
		return RRLAnswer, withType
	case resp[2]&0x04 == 0 && ns > 0: // not authoritative, something in authority
		if _, ok := authorityOwner(resp, off, an, ns, typeNS, seed); ok {
			return RRLReferral, qname
		}
	}
	return RRLNodata, withType
}

// authorityOwner hashes the owner of the first authority record, if it
// has type want; off is where the answer section starts.
func authorityOwner(resp []byte, off int, an, ns uint16, want uint16, seed uint64) (uint64, bool) {
	if ns == 0 {
		return 0, false
	}
	for range an {
		if off = skipRR(resp, off); off < 0 {
			return 0, false
		}
	}
	h, end, ok := hashName(resp, off, seed)
	if !ok || end+2 > len(resp) || binary.BigEndian.Uint16(resp[end:]) != want {
		return 0, false
	}
	return h, true
}

// skipRR returns the offset after the record at off, or -1.
func skipRR(msg []byte, off int) int {
	off = skipName(msg, off)
	if off < 0 || off+10 > len(msg) {
		return -1
	}
	off += 10 + int(binary.BigEndian.Uint16(msg[off+8:]))
	if off > len(msg) {
		return -1
	}
	return off
}

// skipName returns the offset after the name at off, or -1.
func skipName(msg []byte, off int) int {
	for off < len(msg) {
		l := int(msg[off])
		switch {
		case l == 0:
			return off + 1
		case l&0xc0 == 0xc0:
			if off+2 > len(msg) {
				return -1
			}
			return off + 2
		case l&0xc0 != 0:
			return -1
		}
		off += 1 + l
	}
	return -1
}

// hashName hashes the name at off case-insensitively, following
// compression pointers, and returns where it ends in place.
func hashName(msg []byte, off int, seed uint64) (h uint64, end int, ok bool) {
	h, end = seed, -1
	for hops := 0; off < len(msg); {
		l := int(msg[off])
		switch {
		case l == 0:
			if end < 0 {
				end = off + 1
			}
			return mix(h), end, true
		case l&0xc0 == 0xc0:
			if off+2 > len(msg) || hops == maxNameHops {
				return 0, 0, false
			}
			if end < 0 {
				end = off + 2
			}
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3fff)
			hops++
			continue
		case l&0xc0 != 0 || off+1+l > len(msg):
			return 0, 0, false
		}
		h = (h ^ uint64(l)) * 0x100000001b3
		for _, c := range msg[off+1 : off+1+l] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			h = (h ^ uint64(c)) * 0x100000001b3
		}
		off += 1 + l
	}
	return 0, 0, false
}

// slipped turns resp, in place, into the empty truncated answer a
// limited response slips as: its header with TC set and NOERROR, and its
// question; ok is false when resp has no question to keep.
func slipped(resp []byte) ([]byte, bool) {
	if len(resp) < headerLength || binary.BigEndian.Uint16(resp[4:]) != 1 {
		return nil, false
	}
	end := skipName(resp, headerLength)
	if end < 0 || end+4 > len(resp) {
		return nil, false
	}
	resp[2] |= 0x02   // TC
	resp[3] &^= 0x0f  // NOERROR: the client is to ask again over TCP
	clear(resp[6:12]) // no answer, authority or additional records
	return resp[:end+4], true
}
