package listeners

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What one DNS over HTTPS peer can make the listener hold, and the bounds
// on it. A connection may open HTTPLimits.MaxStreams streams, and send
// 64 KiB that the server has not read (the HTTP/2 flow-control window of
// the connection; 16 KiB a stream) in frames of at most 16 KiB. Every
// request takes a place among MaxInFlight (gate.go) until answered: a
// trickling body gives its place to the next request, and a body must be
// in within BodyTimeout. A body is read into pooled buffers the size of
// what arrived (msgbuf.go), never of what its Content-Length declares.

// HTTPSLimits bound a DNS over HTTPS listener.
type HTTPSLimits struct {
	// MaxStreams is the HTTP/2 streams a connection may have open at
	// once; a further one is refused. 0: DefaultHTTPSMaxStreams.
	MaxStreams int
	// MaxInFlight bounds the requests being read, answered or waiting
	// for a forwarded answer; 0: DefaultHTTPSMaxInFlight.
	MaxInFlight int
	// BodyTimeout bounds reading a POST body; 0: DefaultHTTPSBodyTimeout.
	BodyTimeout time.Duration
	Refused     HTTPSRefusals
}

// HTTPSRefusals count the requests the limits refused; each may be nil.
type HTTPSRefusals struct {
	Streams     prometheus.Counter // streams over MaxStreams, reset
	InFlight    prometheus.Counter // 503: MaxInFlight requests being answered
	Evicted     prometheus.Counter // 503: a body still arriving gave its place to a newer request
	BodyTimeout prometheus.Counter // 408: a body not in within BodyTimeout
}

const (
	// DefaultHTTPSMaxStreams is HTTPSLimits.MaxStreams's default: a
	// client that multiplexes waits for a stream or opens another
	// connection, as Go's, curl's and the browsers' do (Go's server
	// allows 250).
	DefaultHTTPSMaxStreams = 32
	// DefaultHTTPSMaxInFlight is HTTPSLimits.MaxInFlight's default:
	// bodies of 64 KiB in every place hold 16 MiB.
	DefaultHTTPSMaxInFlight = 256
	// DefaultHTTPSBodyTimeout is HTTPSLimits.BodyTimeout's default; a
	// client sends its query with its headers.
	DefaultHTTPSBodyTimeout = 2 * time.Second
	// dohFrameSize is the largest HTTP/2 frame read, the least a server
	// may announce.
	dohFrameSize = 16 << 10
	// dohConnWindow and dohStreamWindow are the bytes a peer may send
	// that the server has not read: HTTP/2's least for a connection, and
	// a frame for a stream.
	dohConnWindow, dohStreamWindow = 64 << 10, 16 << 10
)

func (h HTTPSLimits) maxStreams() int  { return cmp.Or(h.MaxStreams, DefaultHTTPSMaxStreams) }
func (h HTTPSLimits) maxInFlight() int { return cmp.Or(h.MaxInFlight, DefaultHTTPSMaxInFlight) }
func (h HTTPSLimits) bodyTimeout() time.Duration {
	return cmp.Or(h.BodyTimeout, DefaultHTTPSBodyTimeout)
}

// http2Config is the HTTP/2 side of the limits.
func (h HTTPSLimits) http2Config() *http.HTTP2Config {
	return &http.HTTP2Config{MaxConcurrentStreams: h.maxStreams(), MaxReadFrameSize: dohFrameSize,
		MaxReceiveBufferPerConnection: dohConnWindow, MaxReceiveBufferPerStream: dohStreamWindow,
		CountError: func(errType string) {
			// A stream over the limit: "stream_PROTOCOL_ERROR_over_max_streams",
			// or REFUSED_STREAM before the client acknowledged the limit.
			if strings.Contains(errType, "over_max_streams") && h.Refused.Streams != nil {
				h.Refused.Streams.Inc()
			}
		}}
}

// errBusy answers a request that found no place.
var errBusy = errors.New("too many requests in flight")

// admit takes r's place among the requests in flight and reads its query.
// release gives back its places and the query's buffer, once answered.
func (l *httpsListener) admit(w http.ResponseWriter, r *http.Request) (req []byte, release func(), status int, err error) {
	rc := http.NewResponseController(w)
	post := r.Method == http.MethodPost
	if post { // before a cut can set it, so as not to undo the cut
		rc.SetReadDeadline(time.Now().Add(l.cfg.HTTPS.bodyTimeout()))
	}
	p := &dohPlaces{l: l, cut: func() { rc.SetReadDeadline(time.Unix(1, 0)) }}
	if p.inflight = l.inflight.enter(p.cut); p.inflight == nil {
		count(l.cfg.HTTPS.Refused.InFlight)
		return nil, nil, http.StatusServiceUnavailable, errBusy
	}
	msg, status, err := dohQuery(r, p.enterLarge)
	release = func() { msg.release(); p.leave() }
	switch {
	case !p.arrived(): // counted by the gate
		status, err = http.StatusServiceUnavailable, errBusy
	case status == http.StatusRequestTimeout:
		count(l.cfg.HTTPS.Refused.BodyTimeout)
	case err == nil:
		if post {
			rc.SetReadDeadline(time.Time{})
		}
		return msg.bytes(), release, 0, nil
	}
	release()
	return nil, nil, status, err
}

// dohPlaces are a request's places: among the requests in flight, and
// among the large messages once its body outgrows the smallest buffer.
// cut stops reading its body.
type dohPlaces struct {
	l               *httpsListener
	cut             func()
	inflight, large *place
}

func (p *dohPlaces) enterLarge() error {
	if p.large = p.l.large.enter(p.cut); p.large == nil {
		count(p.l.cfg.HTTPS.Refused.InFlight)
		return errBusy
	}
	return nil
}

// arrived marks the request's query complete in both gates; false when
// either cut it first.
func (p *dohPlaces) arrived() bool {
	ok := p.l.inflight.arrived(p.inflight)
	if p.large != nil {
		ok = p.l.large.arrived(p.large) && ok
	}
	return ok
}

func (p *dohPlaces) leave() {
	if p.large != nil {
		p.l.large.leave(p.large)
	}
	p.l.inflight.leave(p.inflight)
}

func count(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// refuse answers an HTTP error; over HTTP/1 it closes the connection
// rather than read what is left of the body.
func refuse(w http.ResponseWriter, r *http.Request, status int, err error) {
	if r.ProtoMajor == 1 && r.Method == http.MethodPost {
		w.Header().Set("Connection", "close")
	}
	switch status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", "GET, POST")
	}
	http.Error(w, err.Error(), status)
}

// dohQuery reads the DNS query of a request (RFC 8484 section 4.1): the
// base64url dns parameter of a GET, or the application/dns-message body of
// a POST, into a pooled buffer. The error comes with the HTTP status to
// answer.
func dohQuery(r *http.Request, outgrow func() error) (*msgBuffer, int, error) {
	var msg *msgBuffer
	switch r.Method {
	case http.MethodGet:
		param := r.URL.Query().Get("dns")
		if param == "" {
			return nil, http.StatusBadRequest, errors.New("missing dns parameter")
		}
		// RFC 8484 says without padding; be lenient with clients that pad.
		param = strings.TrimRight(param, "=")
		if base64.RawURLEncoding.DecodedLen(len(param)) > dohMaxMessage {
			return nil, http.StatusBadRequest, errors.New("not a DNS message")
		}
		msg = newMsgBuffer(classOf(base64.RawURLEncoding.DecodedLen(len(param))))
		n, err := base64.RawURLEncoding.Decode(*msg.buf, []byte(param))
		if err != nil {
			msg.release()
			return nil, http.StatusBadRequest, errors.New("the dns parameter is not base64url")
		}
		msg.n = n
	case http.MethodPost:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != dohMediaType {
			return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content type must be %s", dohMediaType)
		}
		var status int
		if msg, status, err = readBody(r, outgrow); err != nil {
			return nil, status, err
		}
	default:
		return nil, http.StatusMethodNotAllowed, errors.New("use GET or POST")
	}
	if msg.n < 12 {
		msg.release()
		return nil, http.StatusBadRequest, errors.New("not a DNS message")
	}
	return msg, 0, nil
}

// readBody reads a POST body of at most a DNS message, growing its
// buffer as the bytes arrive.
func readBody(r *http.Request, outgrow func() error) (*msgBuffer, int, error) {
	if r.ContentLength > dohMaxMessage {
		return nil, http.StatusRequestEntityTooLarge, errBodyTooLarge
	}
	msg := newMsgBuffer(0)
	msg.outgrow = outgrow
	err := msg.readFrom(r.Body, dohMaxMessage)
	if err == nil { // as long as a DNS message can be: is there more?
		var one [1]byte
		if _, err = io.ReadFull(r.Body, one[:]); err == nil {
			err = errMessageTooLarge
		}
	}
	switch {
	case err == io.EOF:
		return msg, 0, nil
	case errors.Is(err, errMessageTooLarge):
		msg.release()
		return nil, http.StatusRequestEntityTooLarge, errBodyTooLarge
	case err == errBusy:
		msg.release()
		return nil, http.StatusServiceUnavailable, errBusy
	case errors.Is(err, os.ErrDeadlineExceeded):
		msg.release()
		return nil, http.StatusRequestTimeout, errors.New("the body did not arrive in time")
	}
	msg.release()
	return nil, http.StatusBadRequest, errors.New("reading the body failed")
}

var errBodyTooLarge = errors.New("the body is larger than a DNS message")

// classOf is the smallest buffer class holding n bytes.
func classOf(n int) int {
	for c, size := range bufferClasses {
		if n <= size {
			return c
		}
	}
	return len(bufferClasses) - 1
}
