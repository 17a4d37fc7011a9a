package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

// httpsScheme marks a DNS over HTTPS upstream (RFC 8484), as in
// CoreDNS's forward.
const httpsScheme = config.UpstreamHTTPS

// dohMime is the media type of a DNS message in a DoH request and reply.
const dohMime = "application/dns-message"

// dohClient asks one DNS over HTTPS upstream with POST over HTTP/2 (or
// HTTP/1.1 when the upstream offers nothing else). One HTTP/2
// connection carries queries in parallel; a second is opened only when
// the upstream's stream limit is reached. Idle connections are closed
// after expire (none kept when 0), and at most maxIdle HTTP/1.1 ones are
// kept (0: no bound). maxAge does not apply: an HTTP/2 connection is
// shared by queries in flight and cannot be retired between two of them
// (nor does CoreDNS's max_age apply to its DoH upstreams).
type dohClient struct {
	url  string // https://IP:port/path
	host string // the HTTP Host: the TLS server name when one is set, as CoreDNS sends it
	tr   *http.Transport
	http *http.Client
	// onConn observes every connection taken for a query: reused, or
	// newly opened.
	onConn func(reused bool)
}

// newDoH returns the client of the upstream at rawURL (as parseDoH
// writes it), trusting it as base says (a copy named for the upstream's
// IP when base has no server name).
func newDoH(rawURL string, base *tls.Config, l poolLimits, onConn func(bool)) *dohClient {
	cfg := base.Clone()
	if cfg.ServerName == "" {
		// Without a tls server name the certificate must hold the
		// upstream's IP address, as for tls:// upstreams.
		cfg.ServerName, _, _ = net.SplitHostPort(dohAddr(rawURL))
	}
	maxIdle := l.maxIdle
	if maxIdle == 0 {
		maxIdle = math.MaxInt32 // net/http reads 0 as 2
	}
	tr := &http.Transport{
		// No Proxy: an HTTPS_PROXY in the environment must not carry
		// the cluster's queries elsewhere. The dialer only ever sees
		// the IP of the URL, so no name is looked up either.
		DialContext:         (&net.Dialer{}).DialContext,
		TLSClientConfig:     cfg,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     l.expire,
		DisableKeepAlives:   l.expire <= 0,
		// The reply is small and checked by its length, not decoded
		// by the transport.
		DisableCompression: true,
	}
	if onConn == nil {
		onConn = func(bool) {}
	}
	return &dohClient{url: rawURL, host: base.ServerName, tr: tr, onConn: onConn, http: &http.Client{Transport: tr,
		// A redirect could point at a name this server would be asked
		// for: the upstream is where it is configured, or it fails.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// exchange POSTs q and reads the reply, all within timeout (and ctx's
// deadline). The query is sent with ID 0, as RFC 8484 asks so that
// HTTP caches can share answers; the reply gets q's ID back.
func (d *dohClient) exchange(ctx context.Context, q *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := d.request(ctx, q)
	if err != nil {
		return nil, err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r, err := readDoHReply(resp)
	if err != nil {
		return nil, err
	}
	r.Id = q.Id
	return r, nil
}

// request builds the POST of q, observing the connection it goes on.
func (d *dohClient) request(ctx context.Context, q *dns.Msg) (*http.Request, error) {
	buf, err := q.Pack()
	if err != nil {
		return nil, err
	}
	buf[0], buf[1] = 0, 0 // ID 0 (RFC 8484 section 4.1)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { d.onConn(info.Reused) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(buf))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", dohMime)
	req.Header.Set("Accept", dohMime)
	// Asking a question again has no effect upstream: marked so, a
	// query that met an idle connection the upstream had just closed
	// is sent again on a new one rather than failed. A nil value is
	// not sent.
	req.Header["Idempotency-Key"] = nil
	if d.host != "" {
		req.Host = d.host
	}
	return req, nil
}

// readDoHReply reads a DNS message from a 200 reply of type
// application/dns-message; anything else is the upstream failing.
func readDoHReply(resp *http.Response) (*dns.Msg, error) {
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != dohMime {
		return nil, fmt.Errorf("reply of type %q, want %s", resp.Header.Get("Content-Type"), dohMime)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, dns.MaxMsgSize+1))
	if err != nil {
		return nil, err
	}
	if len(body) > dns.MaxMsgSize {
		return nil, errors.New("reply longer than a DNS message")
	}
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil {
		return nil, fmt.Errorf("reply: %w", err)
	}
	return r, nil
}

// close closes the idle connections; those in use are closed when
// their query ends.
func (d *dohClient) close() {
	d.tr.CloseIdleConnections()
}
