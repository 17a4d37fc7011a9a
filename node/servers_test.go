package node

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
)

// serversConfig is the demo node with a plain listener limited to zone,
// DNS over TLS with the given certificate, and DNS over HTTPS when set.
func serversConfig(zone, certFile, keyFile string, https bool) string {
	tlsKeys := fmt.Sprintf("tls: {certFile: %q, keyFile: %q}", certFile, keyFile)
	// The manifests do not change here. A slow poll keeps a tick from
	// meeting the old core's stop on reload: protoactor's
	// scheduler.startTimer reads its state unsynchronised, which the race
	// detector reports.
	text := strings.Replace(demoConfig, "interval: 50ms", "interval: 1h", 1) + fmt.Sprintf("servers:\n- {listen: [\"127.0.0.1:0\"], zones: [%s]}\n- {listen: [\"127.0.0.1:0\"], transport: tls, %s}\n", zone, tlsKeys)
	if https {
		text += fmt.Sprintf("- {listen: [\"127.0.0.1:0\"], transport: https, path: /q, %s}\n", tlsKeys)
	}
	return text
}

func rcodeOf(t *testing.T, addr, name string) int {
	t.Helper()
	r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	return r.Rcode
}

// presentedName is the common name of the certificate addr presents.
func presentedName(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"dot"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func reloadWith(t *testing.T, n *Node, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// A reload changes a listener's zones and certificate on the same socket,
// binds an added listener and unbinds a removed one.
func TestServersReload(t *testing.T) {
	dir := t.TempDir()
	certA, keyA, _ := testutil.WriteCert(t, dir, "a", "first")
	certB, keyB, _ := testutil.WriteCert(t, dir, "b", "second")
	n, path, _ := startDemoNode(t, serversConfig("shop.svc.cluster.local", certA, keyA, false), false)
	plain, dot := n.ServerAddrs(0)[0], n.ServerAddrs(1)[0]
	const shop, data = "frontend.shop.svc.cluster.local.", "redis.data.svc.cluster.local."
	if rcodeOf(t, plain, shop) != dns.RcodeSuccess || rcodeOf(t, plain, data) != dns.RcodeRefused {
		t.Fatal("the zone-limited listener does not keep to its zone")
	}
	if got := presentedName(t, dot); got != "first" {
		t.Fatalf("presents %q", got)
	}

	reloadWith(t, n, path, serversConfig("data.svc.cluster.local", certB, keyB, true))
	if got := n.ServerAddrs(0); len(got) != 1 || got[0] != plain {
		t.Fatalf("servers[0] moved from %s to %v", plain, got)
	}
	if rcodeOf(t, plain, data) != dns.RcodeSuccess || rcodeOf(t, plain, shop) != dns.RcodeRefused {
		t.Fatal("the reloaded zones do not apply")
	}
	if got := presentedName(t, dot); got != "second" {
		t.Fatalf("after the reload presents %q", got)
	}
	dotClient := &dns.Client{Net: "tcp-tls", Timeout: 2 * time.Second, TLSConfig: &tls.Config{InsecureSkipVerify: true}}
	if r, _, err := dotClient.Exchange(new(dns.Msg).SetQuestion(data, dns.TypeA), dot); err != nil || len(r.Answer) != 1 {
		t.Fatalf("over TLS: %v %v", r, err)
	}
	doh := n.ServerAddrs(2)[0]
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	q := new(dns.Msg)
	q.SetQuestion(shop, dns.TypeA)
	packed, _ := q.Pack()
	resp, err := client.Post("https://"+doh+"/q", "application/dns-message", bytes.NewReader(packed))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil || len(r.Answer) != 1 {
		t.Fatalf("the added https listener: %d %v %v", resp.StatusCode, r, err)
	}
	metrics := scrapeMetrics(t, n)
	for _, server := range []string{"dns://" + plain, "tls://" + dot, "https://" + doh} {
		if !strings.Contains(metrics, `server="`+server+`"`) {
			t.Errorf("no request metrics labelled server=%q", server)
		}
	}

	reloadWith(t, n, path, serversConfig("data.svc.cluster.local", certB, keyB, false))
	if len(n.ServerAddrs(2)) != 0 {
		t.Fatal("servers[2] still listed")
	}
	if _, err := client.Post("https://"+doh+"/q", "application/dns-message", bytes.NewReader(packed)); err == nil {
		t.Fatal("the removed https listener still answers")
	}
}

func scrapeMetrics(t *testing.T, n *Node) string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A certificate that does not load, or a port in use, stops the start
// with an error naming the key; so does a reload, which keeps the old
// listeners serving.
func TestServersErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	certA, keyA, _ := testutil.WriteCert(t, dir, "a", "first")
	_, keyB, _ := testutil.WriteCert(t, dir, "b", "second")
	cfg, err := config.Parse([]byte(serversConfig("shop.svc.cluster.local", certA, keyB, false)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.HasPrefix(err.Error(), "servers[1].tls: ") {
		t.Fatalf("New = %v, want an error naming servers[1].tls", err)
	}

	n, path, _ := startDemoNode(t, serversConfig("shop.svc.cluster.local", certA, keyA, false), false)
	plain := n.ServerAddrs(0)[0]
	text := serversConfig("shop.svc.cluster.local", certA, keyB, false)
	os.WriteFile(path, []byte(text), 0o644)
	next, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(next); err == nil || !strings.Contains(err.Error(), "servers[1].tls") {
		t.Fatalf("Reload = %v, want an error naming servers[1].tls", err)
	}
	inUse := strings.Replace(serversConfig("shop.svc.cluster.local", certA, keyA, false), `"127.0.0.1:0"], zones`, `"127.0.0.1:0", "`+plain+`"], zones`, 1)
	os.WriteFile(path, []byte(inUse), 0o644)
	if next, err = config.Load(path); err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(next); err == nil || !strings.Contains(err.Error(), "servers[0].listen[1]") {
		t.Fatalf("Reload = %v, want an error naming servers[0].listen[1]", err)
	}
	if rcodeOf(t, plain, "frontend.shop.svc.cluster.local.") != dns.RcodeSuccess || presentedName(t, n.ServerAddrs(1)[0]) != "first" {
		t.Fatal("a rejected reload changed the listeners")
	}
}
