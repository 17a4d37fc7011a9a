package corefile

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// NodeLocal DNSCache's Corefile (kubernetes/kubernetes
// cluster/addons/dns/nodelocaldns) is a template: its installer fills
// __PILLAR__DNS__DOMAIN__, __PILLAR__LOCAL__DNS__ and
// __PILLAR__DNS__SERVER__ with sed, and node-cache, the DaemonSet's
// binary (kubernetes/dns cmd/node-cache), fills the rest when it starts.
// FillNodeCache does node-cache's part, so that the ConfigMap's Corefile
// can be served as it is.

// The placeholders node-cache fills.
const (
	pillarLocalDNS        = "__PILLAR__LOCAL__DNS__"
	pillarDNSServer       = "__PILLAR__DNS__SERVER__"
	pillarClusterDNS      = "__PILLAR__CLUSTER__DNS__"
	pillarUpstreamServers = "__PILLAR__UPSTREAM__SERVERS__"
)

// DefaultUpstreamSvc is node-cache's -upstreamsvc default.
const DefaultUpstreamSvc = "kube-dns"

// NodeCache is what node-cache knows when it fills its Corefile: its
// flags and its environment. The zero value is node-cache started with
// no flags and an empty environment.
type NodeCache struct {
	// LocalIP is node-cache's -localip: the comma-separated addresses
	// that __PILLAR__LOCAL__DNS__ stands for (NodeLocal's DaemonSet
	// passes the link-local address and, with kube-proxy in iptables
	// mode, the kube-dns ClusterIP). Empty: the placeholder cannot be
	// filled.
	LocalIP string
	// UpstreamSvc is node-cache's -upstreamsvc: the Service whose
	// ClusterIP __PILLAR__CLUSTER__DNS__ stands for, read as node-cache
	// reads it, from the <SERVICE>_SERVICE_HOST variable Kubernetes sets
	// in pods of the Service's namespace. Empty: kube-dns.
	UpstreamSvc string
	// ClusterDNS, when set, is the address __PILLAR__CLUSTER__DNS__
	// stands for (IP or IP:port), in place of the Service's variable:
	// outside a pod, or with enableServiceLinks: false.
	ClusterDNS string
	// UpstreamServers fill __PILLAR__UPSTREAM__SERVERS__, comma- or
	// space-separated (node-cache takes them from the kube-dns
	// ConfigMap's upstreamNameservers). Empty: /etc/resolv.conf, as
	// node-cache without that ConfigMap.
	UpstreamServers string
	// Getenv reads the environment; nil: an empty one.
	Getenv func(name string) (string, bool)
}

// ServiceHostVar is the environment variable holding the ClusterIP of
// the Service svc in a pod of its namespace (kube-dns-upstream:
// KUBE_DNS_UPSTREAM_SERVICE_HOST), the one node-cache reads.
func ServiceHostVar(svc string) string {
	return strings.ToUpper(strings.ReplaceAll(svc, "-", "_")) + "_SERVICE_HOST"
}

// ClusterDNSAddr is the address __PILLAR__CLUSTER__DNS__ stands for:
// ClusterDNS, else the ClusterIP of UpstreamSvc from its variable. The
// error says what is missing.
func (n NodeCache) ClusterDNSAddr() (string, error) {
	if n.ClusterDNS != "" {
		if !validUpstream(n.ClusterDNS) {
			return "", fmt.Errorf("--cluster-dns %q is not an IP address or IP:port", n.ClusterDNS)
		}
		return n.ClusterDNS, nil
	}
	svc := n.UpstreamSvc
	if svc == "" {
		svc = DefaultUpstreamSvc
	}
	name := ServiceHostVar(svc)
	var v string
	ok := false
	if n.Getenv != nil {
		v, ok = n.Getenv(name)
	}
	switch {
	case !ok || v == "":
		return "", fmt.Errorf("the ClusterIP of Service %s (--upstreamsvc) is unknown: %s is not set "+
			"(Kubernetes sets it in pods of the Service's namespace started after it, unless enableServiceLinks is false); "+
			"give --cluster-dns ADDR", svc, name)
	case !isIP(v):
		return "", fmt.Errorf("%s=%q (the ClusterIP of Service %s) is not an IP address", name, v, svc)
	}
	return v, nil
}

// FillNodeCache fills the placeholders node-cache fills in src, the
// Corefile read from file, as node-cache does: __PILLAR__LOCAL__DNS__
// with the -localip addresses, __PILLAR__CLUSTER__DNS__ with the
// upstream Service's ClusterIP, __PILLAR__UPSTREAM__SERVERS__ with the
// upstream servers, and __PILLAR__DNS__SERVER__ with nothing (the
// installer fills it where kube-proxy runs in iptables mode; elsewhere
// node-cache drops it). A placeholder that cannot be filled, or one only
// the installer fills, is an error naming it and its line. A value
// never holds a line break, so findings keep their line numbers.
func FillNodeCache(file string, src []byte, n NodeCache) ([]byte, error) {
	if !bytes.Contains(src, []byte("__PILLAR__")) {
		return src, nil
	}
	out := src
	for _, p := range []string{pillarLocalDNS, pillarClusterDNS, pillarUpstreamServers, pillarDNSServer} {
		if !bytes.Contains(out, []byte(p)) {
			continue
		}
		v, err := n.fill(p)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", file, pillarLine(out, p), p, err)
		}
		out = bytes.ReplaceAll(out, []byte(p), []byte(v))
	}
	if m := pillar.Find(out); m != nil {
		return nil, fmt.Errorf("%s:%d: %s: %s", file, pillarLine(out, string(m)), m, installerOnly(string(m)))
	}
	return out, nil
}

// pillar matches a placeholder of NodeLocal DNSCache's templates.
var pillar = regexp.MustCompile(`__PILLAR__[A-Z0-9_]*__`)

// installerOnly says why a placeholder left in the Corefile is not
// node-cache's to fill.
func installerOnly(p string) string {
	if p == "__PILLAR__DNS__DOMAIN__" {
		return "NodeLocal DNSCache's installer fills it (sed, with the cluster domain, e.g. cluster.local), node-cache does not: " +
			"write the cluster domain in its place"
	}
	return "not a placeholder node-cache fills (it fills " + strings.Join([]string{pillarLocalDNS, pillarDNSServer,
		pillarClusterDNS, pillarUpstreamServers}, ", ") + "): write its value in its place"
}

// fill is the value of placeholder p.
func (n NodeCache) fill(p string) (string, error) {
	switch p {
	case pillarLocalDNS:
		return n.localIPs()
	case pillarClusterDNS:
		return n.ClusterDNSAddr()
	case pillarUpstreamServers:
		return n.upstreamServers()
	}
	return "", nil // __PILLAR__DNS__SERVER__
}

// localIPs are the -localip addresses, space-separated, as node-cache
// writes them.
func (n NodeCache) localIPs() (string, error) {
	if n.LocalIP == "" {
		return "", fmt.Errorf("node-cache fills it from -localip: give --localip (the link-local address, " +
			"and the kube-dns ClusterIP where kube-proxy runs in iptables mode, comma-separated)")
	}
	ips := strings.Split(n.LocalIP, ",")
	for _, ip := range ips {
		if !isIP(ip) {
			return "", fmt.Errorf("--localip %q: %q is not an IP address", n.LocalIP, ip)
		}
	}
	return strings.Join(ips, " "), nil
}

// upstreamServers are UpstreamServers, space-separated, or
// /etc/resolv.conf.
func (n NodeCache) upstreamServers() (string, error) {
	list := strings.Fields(strings.ReplaceAll(n.UpstreamServers, ",", " "))
	if len(list) == 0 {
		return "/etc/resolv.conf", nil
	}
	for _, u := range list {
		if !validUpstream(u) && !strings.HasPrefix(u, "/") && !validUpstream(strings.TrimPrefix(u, "tls://")) {
			return "", fmt.Errorf("--upstream-servers %q: %q is not an IP, IP:port, tls://IP[:port] or resolv.conf path", n.UpstreamServers, u)
		}
		if strings.ContainsAny(u, "{}#\"'") {
			return "", fmt.Errorf("--upstream-servers %q: %q holds a Corefile delimiter", n.UpstreamServers, u)
		}
	}
	return strings.Join(list, " "), nil
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// validUpstream reports whether s is an IP or IP:port.
func validUpstream(s string) bool {
	if isIP(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")) {
		return true
	}
	_, err := netip.ParseAddrPort(s)
	return err == nil
}

// pillarLine is the line of src where s first appears, from 1.
func pillarLine(src []byte, s string) int {
	i := bytes.Index(src, []byte(s))
	if i < 0 {
		return 0
	}
	return bytes.Count(src[:i], []byte("\n")) + 1
}
