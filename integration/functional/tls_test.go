package functional

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// serversNode is a node serving the demo cluster on dns.listen and on
// extra listeners: DNS over TLS and HTTPS, a plain listener limited to
// the shop namespace, and a whoami listener.
type serversNode struct {
	*node.Node
	main, dot, doh, shop, whoami string
	certFile                     string
	certDir                      string
	pool                         *x509.CertPool
}

func startServersNode(t *testing.T) *serversNode {
	t.Helper()
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "demo-cluster.yaml")
	os.WriteFile(manifest, demo, 0o644)
	certFile, keyFile, cert := testutil.WriteCert(t, dir, "dns", "first")
	tlsKeys := fmt.Sprintf("tls: {certFile: %q, keyFile: %q}", certFile, keyFile)
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: [%q]}
servers:
- {listen: ["127.0.0.1:0"], transport: tls, %s}
- {listen: ["127.0.0.1:0"], transport: https, %s}
- {listen: ["127.0.0.1:0"], zones: [shop.svc.cluster.local]}
- {listen: ["127.0.0.1:0"], whoami: true}
`, manifest, u.Addr, tlsKeys, tlsKeys), true)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &serversNode{Node: n.Node, main: n.Addr, dot: n.ServerAddrs(0)[0], doh: n.ServerAddrs(1)[0],
		shop: n.ServerAddrs(2)[0], whoami: n.ServerAddrs(3)[0], certFile: certFile, certDir: dir, pool: pool}
}

// kdig runs Knot's kdig against addr with args and returns the answer's
// records as "TYPE data" lines, sorted, the header's status and the
// whole output.
func kdig(t *testing.T, addr string, args ...string) (lines []string, status, out string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	full := append([]string{"@" + host, "-p", port, "+timeout=2", "+retry=0"}, args...)
	b, err := exec.Command("kdig", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("kdig %v: %v\n%s", full, err, b)
	}
	m := regexp.MustCompile(`->>HEADER<<-.*status: (\w+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("kdig %v: no status in\n%s", full, b)
	}
	section := regexp.MustCompile(`(?s);; ANSWER SECTION:\n(.*?)\n\n`).FindSubmatch(b)
	if section != nil {
		for _, l := range strings.Split(string(section[1]), "\n") {
			if f := strings.Fields(l); len(f) >= 5 {
				lines = append(lines, f[3]+" "+strings.Join(f[4:], " "))
			}
		}
	}
	slices.Sort(lines)
	return lines, string(m[1]), string(b)
}

func requireKdig(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Fatal("kdig is not installed (scripts/deps.sh installs knot-dnsutils)")
	}
}

// kdig over DNS over TLS and HTTPS (POST and GET), verifying the
// certificate: cluster names, and forwarded names whose answers come
// late from Unbound.
func TestKdigOverTLSAndHTTPS(t *testing.T) {
	requireKdig(t)
	s := startServersNode(t)
	verify := []string{"+tls-ca=" + s.certFile, "+tls-hostname=localhost"}
	// Each transport with the session line kdig prints for it.
	transports := map[string]struct {
		args    []string
		session string
	}{
		"tls":          {append([]string{"+tls"}, verify...), ";; TLS session"},
		"tls, no ca":   {[]string{"+tls"}, ";; TLS session"}, // opportunistic: encrypted, not verified
		"https POST":   {append([]string{"+https"}, verify...), "(HTTP/2-POST)-(localhost/dns-query)-(status: 200)"},
		"https GET":    {append([]string{"+https", "+https-get"}, verify...), "(HTTP/2-GET)-(localhost/dns-query)-(status: 200)"},
		"https, no ca": {[]string{"+https"}, "(HTTP/2-POST)"},
	}
	cases := []struct{ name, qtype, want string }{
		{"frontend.shop.svc.cluster.local.", "A", "A 10.96.10.10"},
		{"api.shop.svc.cluster.local.", "AAAA", "AAAA fd00:10:96::c"},
		{"www.example.test.", "A", "A 192.0.2.1"},
	}
	for transport, tr := range transports {
		addr := s.dot
		if strings.HasPrefix(transport, "https") {
			addr = s.doh
		}
		for _, c := range cases {
			lines, status, out := kdig(t, addr, append(slices.Clone(tr.args), c.name, c.qtype)...)
			if status != "NOERROR" || len(lines) != 1 || lines[0] != c.want || !strings.Contains(out, tr.session) {
				t.Errorf("%s %s %s: %s %q, want %q over %q:\n%s", transport, c.name, c.qtype, status, lines, c.want, tr.session, out)
			}
		}
		if _, status, _ := kdig(t, addr, append(slices.Clone(tr.args), "nope.shop.svc.cluster.local.", "A")...); status != "NXDOMAIN" {
			t.Errorf("%s: a missing service gets %s", transport, status)
		}
	}
}

func dohRequest(t *testing.T, client *http.Client, method, url string, q []byte) (*http.Response, *dns.Msg) {
	t.Helper()
	var req *http.Request
	if method == "GET" {
		req, _ = http.NewRequest("GET", url+"?dns="+base64.RawURLEncoding.EncodeToString(q), nil)
	} else {
		req, _ = http.NewRequest("POST", url, bytes.NewReader(q))
		req.Header.Set("Content-Type", "application/dns-message")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := new(dns.Msg)
	if resp.StatusCode == http.StatusOK {
		if err := m.Unpack(body); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	return resp, m
}

// A Go client over DNS over HTTPS, GET and POST: the answer, its media
// type, a max-age from the TTLs, and HTTP errors for bad requests.
func TestDoHWithAGoClient(t *testing.T) {
	s := startServersNode(t)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: s.pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}}
	url := "https://" + s.doh + "/dns-query"
	for _, method := range []string{"GET", "POST"} {
		q := new(dns.Msg)
		q.SetQuestion("frontend.shop.svc.cluster.local.", dns.TypeA)
		q.Id = 0
		packed, _ := q.Pack()
		resp, m := dohRequest(t, client, method, url, packed)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/dns-message" ||
			resp.Header.Get("Cache-Control") != "max-age=5" {
			t.Fatalf("%s: %d, headers %v", method, resp.StatusCode, resp.Header)
		}
		if got := testutil.Records(m.Answer); len(got) != 1 || got[0] != "frontend.shop.svc.cluster.local.\t5\tIN\tA\t10.96.10.10" {
			t.Fatalf("%s: answer %q", method, got)
		}
	}
	resp, _ := dohRequest(t, client, "GET", url, []byte{1, 2})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a short message: %d, want 400", resp.StatusCode)
	}
	resp, err := client.Post(url, "text/plain", strings.NewReader("frontend"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d, want 415", resp.StatusCode)
	}
}

// A plain listener limited to one namespace answers it and refuses the
// rest, while dns.listen answers every name.
func TestZoneLimitedListener(t *testing.T) {
	s := startServersNode(t)
	if got := harness.Dig(t, s.shop, "frontend.shop.svc.cluster.local", "A"); len(got) != 1 || got[0] != "10.96.10.10" {
		t.Fatalf("its own zone: %q", got)
	}
	for _, proto := range []string{"+notcp", "+tcp"} {
		for _, name := range []string{"redis.data.svc.cluster.local", "www.example.test", "cluster.local"} {
			if status := harness.DigStatus(t, s.shop, proto, name, "A"); status != "REFUSED" {
				t.Errorf("%s %s on the shop listener: %s, want REFUSED", proto, name, status)
			}
		}
	}
	if got := harness.Dig(t, s.main, "redis.data.svc.cluster.local", "A"); len(got) != 1 {
		t.Fatalf("dns.listen: %q", got)
	}
}

// Renewing the certificate files changes what the next handshakes
// present, without a reload or a new socket.
func TestCertificateRotation(t *testing.T) {
	requireKdig(t)
	s := startServersNode(t)
	presented := func(addr string, protos ...string) (string, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: protos})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	testutil.WriteCert(t, s.certDir, "dns", "second")
	for addr, protos := range map[string][]string{s.dot: {"dot"}, s.doh: {"h2"}} {
		testutil.Eventually(t, 10*time.Second, func() error {
			name, err := presented(addr, protos...)
			if err == nil && name != "second" {
				err = fmt.Errorf("%s presents %q", addr, name)
			}
			return err
		})
	}
	lines, status, _ := kdig(t, s.dot, "+tls-ca="+s.certFile, "+tls-hostname=localhost", "frontend.shop.svc.cluster.local.", "A")
	if status != "NOERROR" || len(lines) != 1 {
		t.Fatalf("kdig trusting the new certificate: %s %q", status, lines)
	}
}

// whoami over UDP and TCP: the client's address and port as CoreDNS's
// whoami plugin gives them.
func TestWhoamiListener(t *testing.T) {
	s := startServersNode(t)
	for _, proto := range []string{"udp", "tcp"} {
		conn, err := dns.Dial(proto, s.whoami)
		if err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		m.SetQuestion("frontend.shop.svc.cluster.local.", dns.TypeA)
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		r, err := conn.ReadMsg()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(conn.LocalAddr().String())
		want := []string{
			"_" + proto + ".frontend.shop.svc.cluster.local.\t0\tIN\tSRV\t0 0 " + port + " .",
			"frontend.shop.svc.cluster.local.\t0\tIN\tA\t127.0.0.1",
		}
		if got := testutil.Records(r.Extra); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || !slices.Equal(got, want) {
			t.Fatalf("%s: answer %v, extra %q; want extra %q", proto, r.Answer, got, want)
		}
	}
}
