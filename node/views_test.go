package node

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// The first view whose expressions hold answers, from its own hosts;
// other queries are answered by the top-level plane, over UDP and TCP.
func TestViewsAnswerFromTheirPlane(t *testing.T) {
	n, _, _ := startDemoNode(t, `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "", lameduck: 0s}
kubernetes: {enabled: false}
forward: {upstreams: []}
hosts: {entries: ["192.0.2.3 printer.example.", "2001:db8::3 printer.example."]}
views:
- name: tcp-a
  expr: ["type() == 'A'", "proto() == 'tcp'"]
  hosts: {entries: ["192.0.2.2 printer.example."]}
- name: a
  expr: ["type() == 'A'"]
  hosts: {entries: ["192.0.2.1 printer.example."]}
`, false)
	addr := n.DNSAddrs()[0]
	for _, c := range []struct {
		proto string
		qtype uint16
		want  string
	}{
		{"udp", dns.TypeA, "192.0.2.1"},
		{"tcp", dns.TypeA, "192.0.2.2"},
		{"udp", dns.TypeAAAA, "2001:db8::3"},
		{"tcp", dns.TypeAAAA, "2001:db8::3"},
	} {
		checkAnswer(t, addr, c.proto, answerCase{qname: "printer.example.", qtype: c.qtype, rcode: dns.RcodeSuccess,
			answer: []string{"printer.example. 3600 IN " + dns.TypeToString[c.qtype] + " " + c.want}})
	}
}

// What a view's plane cannot be built from stops the start, naming the
// view's key.
func TestViewStartErrorNamesTheView(t *testing.T) {
	err := startError(t, `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
views:
- name: dot
  expr: ["true"]
  forward: {upstreams: ["tls://192.0.2.1"], tls: {caFile: /nonexistent/ca.pem}}
`)
	if err == nil || !strings.Contains(err.Error(), "views[0]: forward.tls.caFile") {
		t.Fatalf("Start = %v, want an error naming views[0]: forward.tls.caFile", err)
	}
}
