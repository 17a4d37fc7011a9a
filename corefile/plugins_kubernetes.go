package corefile

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
)

// kubernetesPlugin maps the kubernetes plugin and its options to
// kubernetes.*. Where the plugin leaves an option out, CoreDNS's default
// is written (pods disabled, no fallthrough), not shardns's.
func (c *converter) kubernetesPlugin(s *server, d *Directive) {
	if !c.claim("kubernetes", d, "cluster (kubernetes plugin)") {
		return
	}
	k := &c.cfg.Kubernetes
	fwd, rev := c.clusterZones(s, d)
	if len(fwd) == 0 {
		c.reverseOnly(d, rev)
		return
	}
	k.Enabled = true
	c.kubeBlock = s.block
	if len(fwd) > 1 && slices.Contains(fwd, ".") {
		c.unmapped(d.place(), "kubernetes zones %s: \".\" holds every other zone; shardns takes it alone", strings.Join(fwd, " "))
		fwd = []string{"."}
	}
	if len(fwd) > 0 {
		k.Zones = fwd
	}
	if slices.Equal(fwd, []string{"."}) {
		c.deferred = append(c.deferred, func() { c.rootZone(d) })
	}
	k.ReverseZones = rev
	k.Pods = "disabled"
	k.Fallthrough = []string{}
	c.options(d, func(o *Directive) bool { return c.kubernetesOption(k, o) })
}

// reverseOnly reports a kubernetes plugin of reverse zones alone (the
// Talos template with an empty cluster domain renders one) and leaves it
// out. CoreDNS refuses to start on it ("non-reverse zone name must be
// used"): a PTR answer names its service under the plugin's first
// cluster domain, and there is none. Serving it under cluster.local, the
// default, would answer names the Corefile never mentions.
func (c *converter) reverseOnly(d *Directive, rev []string) {
	k := &c.cfg.Kubernetes
	k.Enabled, k.Zones, k.ReverseZones = false, []string{}, []string{}
	c.unmapped(d.place(), "kubernetes %s: no cluster domain, only reverse zones, which CoreDNS refuses to start on "+
		"(\"non-reverse zone name must be used\"); name the cluster domain first (kubernetes cluster.local %s)",
		strings.Join(rev, " "), strings.Join(rev, " "))
}

// clusterZones splits the plugin's zones (its arguments, else the
// block's) into cluster domains and reverse zones.
func (c *converter) clusterZones(s *server, d *Directive) (fwd, rev []string) {
	rev = []string{}
	args := d.Args
	if len(args) == 0 {
		args = s.blockZones
	}
	for _, a := range args {
		zones, err := keyZones(a)
		if err != nil {
			c.unmapped(d.place(), "kubernetes zone %s: %v", a, err)
			continue
		}
		for _, z := range zones {
			switch {
			case z == ".":
				fwd = appendNew(fwd, z) // see rootZone
			case isReverse(z):
				rev = appendNew(rev, z)
			case !config.ValidDomain(z):
				c.unmapped(d.place(), "kubernetes zone %s: not a host-style domain name", z)
			default:
				fwd = appendNew(fwd, z)
			}
		}
	}
	return fwd, rev
}

func (c *converter) kubernetesOption(k *config.KubernetesConfig, o *Directive) bool {
	switch o.Name {
	case "pods":
		if len(o.Args) == 1 && (o.Args[0] == "disabled" || o.Args[0] == "insecure" || o.Args[0] == "verified") {
			k.Pods = o.Args[0]
		} else {
			c.unmapped(o.place(), "pods %s: must be disabled, insecure or verified", strings.Join(o.Args, " "))
		}
	case "endpoint_pod_names":
		k.EndpointPodNames = true
	case "ttl":
		n, err := strconv.Atoi(strings.Join(o.Args, " "))
		if err != nil || n < 0 || n > 3600 {
			c.unmapped(o.place(), "ttl %s: must be 0 to 3600 seconds", strings.Join(o.Args, " "))
			break
		}
		k.TTL = &n
	case "namespaces":
		k.Namespaces = append(k.Namespaces, o.Args...)
	case "labels":
		k.LabelSelector = strings.Join(o.Args, " ")
	case "namespace_labels":
		k.NamespaceSelector = strings.Join(o.Args, " ")
	case "noendpoints":
		k.NoEndpoints = true
	case "ignore":
		if len(o.Args) != 1 || o.Args[0] != "empty_service" {
			return false
		}
		k.IgnoreEmptyService = true
	case "fallthrough":
		k.Fallthrough = c.fallthroughZones(o, k.AllZones())
	case "kubeconfig":
		if len(o.Args) == 0 {
			return false
		}
		if len(o.Args) > 2 {
			c.unmapped(o.place(), "kubeconfig %s: takes a file and at most one context", strings.Join(o.Args, " "))
			break
		}
		k.Kubeconfig = o.Args[0]
		if len(o.Args) == 2 {
			k.Context = o.Args[1]
		}
	case "multicluster":
		c.multiclusterOption(k, o)
	case "startup_timeout":
		if dur, ok := c.duration(o, 0); ok {
			k.StartupTimeout = config.Duration(dur)
		}
	case "apiserver_qps", "apiserver_burst", "apiserver_max_inflight":
		c.apiserverOption(k, o)
	case "endpoint", "tls":
		c.unmapped(o.place(), "%s: shardns connects with a kubeconfig (kubernetes.kubeconfig) or the pod's service account", o.Name)
	case "upstream":
		c.note(o.place(), "upstream: obsolete in CoreDNS; shardns leaves ExternalName targets outside the cluster to the client's resolver")
	case "resyncperiod":
		c.note(o.place(), "resyncperiod: shardns's watches do not resync")
	default:
		return false
	}
	return true
}

// apiserverOption maps the bounds on requests to the API server, read
// as CoreDNS reads them: one number, not negative (0 keeps the default);
// what CoreDNS refuses to start on is reported.
func (c *converter) apiserverOption(k *config.KubernetesConfig, o *Directive) {
	arg := strings.Join(o.Args, " ")
	if o.Name == "apiserver_qps" {
		qps, err := strconv.ParseFloat(arg, 32)
		if len(o.Args) != 1 || err != nil || qps < 0 || math.IsNaN(qps) || math.IsInf(qps, 0) {
			c.unmapped(o.place(), "apiserver_qps %s: must be one number of requests per second, not negative", arg)
			return
		}
		k.APIServerQPS = qps
		return
	}
	n, err := strconv.Atoi(arg)
	if len(o.Args) != 1 || err != nil || n < 0 {
		c.unmapped(o.place(), "%s %s: must be one whole number, not negative", o.Name, arg)
		return
	}
	if o.Name == "apiserver_burst" {
		k.APIServerBurst = n
	} else {
		k.APIServerMaxInflight = n
	}
}

// multiclusterOption maps `multicluster ZONES`: each zone, one of the
// plugin's own, moves from kubernetes.zones to kubernetes.multicluster.
// CoreDNS answers nothing for a multicluster zone the plugin is not
// authoritative for (its names never reach the plugin), nor for the
// option without zones: those convert to nothing, and say so.
func (c *converter) multiclusterOption(k *config.KubernetesConfig, o *Directive) {
	if len(o.Args) == 0 {
		c.note(o.place(), "multicluster without zones: CoreDNS then serves no multicluster zone; nothing to convert")
		return
	}
	for _, a := range o.Args {
		z, err := NormalizeZone(a)
		switch {
		case err != nil || !config.ValidDomain(z):
			c.unmapped(o.place(), "multicluster %s: not a domain name", a)
		case slices.Contains(k.Multicluster, z):
		case !slices.Contains(k.Zones, z):
			c.note(o.place(), "multicluster %s: not one of the kubernetes plugin's zones (%s), so CoreDNS answers none of its names; "+
				"left out (list it among the plugin's zones too: kubernetes %s %s { multicluster %s })",
				z, strings.Join(k.Zones, ", "), strings.Join(k.Zones, " "), z, z)
		case len(k.Zones) == 1:
			c.unmapped(o.place(), "multicluster %s: the plugin's only zone; shardns answers multicluster names beside a cluster domain, "+
				"whose namespaces they follow: add one (kubernetes cluster.local %s { multicluster %s })", z, z, z)
		default:
			k.Zones = slices.DeleteFunc(k.Zones, func(own string) bool { return own == z })
			k.Multicluster = append(k.Multicluster, z)
		}
	}
}

// fallthroughZones reads a fallthrough option: its zones, or all of the
// plugin's zones when it names none (or the root).
func (c *converter) fallthroughZones(o *Directive, all []string) []string {
	if len(o.Args) == 0 {
		return all
	}
	out := []string{}
	for _, a := range o.Args {
		z, servable := servableZone(a)
		switch {
		case !servable:
			c.unmapped(o.place(), "fallthrough %s: not a domain name", a)
		case z == ".":
			return all
		default:
			out = appendNew(out, z)
		}
	}
	return out
}

// isReverse reports whether z is a reverse zone (under in-addr.arpa or
// ip6.arpa).
func isReverse(z string) bool {
	return z == "in-addr.arpa" || z == "ip6.arpa" ||
		strings.HasSuffix(z, ".in-addr.arpa") || strings.HasSuffix(z, ".ip6.arpa")
}

// federationPlugin maps CoreDNS 1.6's federation plugin (which kube-dns
// ConfigMaps' federations become) to federation.*: its zones (else the
// block's) must be kubernetes zones, checked once every block is read.
func (c *converter) federationPlugin(s *server, d *Directive) {
	if !c.claim("federation", d, "federation list") {
		return
	}
	f := &c.cfg.Federation
	f.Names = map[string]string{}
	args := d.Args
	if len(args) == 0 {
		args = s.blockZones
	}
	for _, o := range d.Block {
		switch {
		case o.Name == "upstream":
			f.Upstream = true
			if len(o.Args) > 0 {
				c.note(o.place(), "federation upstream %s: shardns resolves the CNAME targets through its own forwarder", strings.Join(o.Args, " "))
			}
		case len(o.Args) == 1:
			if prev, ok := f.Names[o.Name]; ok && prev != o.Args[0] {
				c.note(o.place(), "federation %s is named twice: the last domain, %s, is kept, as CoreDNS keeps it", o.Name, o.Args[0])
			}
			f.Names[o.Name] = o.Args[0]
		default:
			c.unmapped(o.place(), "federation line %q: want NAME DOMAIN or upstream", strings.TrimSpace(o.Name+" "+strings.Join(o.Args, " ")))
		}
	}
	c.deferred = append(c.deferred, func() {
		k := c.cfg.Kubernetes
		if !k.Enabled {
			c.unmapped(d.place(), "federation needs the kubernetes plugin, whose names it extends")
			return
		}
		var zones []string
		for _, a := range args {
			nz, err := NormalizeZone(a)
			switch {
			case err != nil:
				c.unmapped(d.place(), "federation zone %s: %v", a, err)
			case nz == ".":
				c.note(d.place(), "federation zone \".\": federation names are those of the kubernetes zones (%s), the only names the kubernetes plugin answers", strings.Join(k.Zones, ", "))
			case isReverse(nz):
				c.note(d.place(), "federation zone %s: reverse names have no federation label; left out", nz)
			case !slices.Contains(k.Zones, nz):
				c.unmapped(d.place(), "federation zone %s: not one of the kubernetes zones (%s)", a, strings.Join(k.Zones, ", "))
			default:
				zones = appendNew(zones, nz)
			}
		}
		if len(zones) < len(k.Zones) {
			f.Zones = zones // else every kubernetes zone, the default
		}
		if len(f.Zones) == 0 {
			f.Zones = nil
		}
	})
}

// rootZone maps a kubernetes plugin in the root zone (a "." block's
// plugin that names no zones) to what CoreDNS serves then: cluster names
// under the root (web.ns.svc.), and NXDOMAIN for every other name,
// cluster.local ones included, unless fallthrough passes them on. Beside
// server blocks of other zones, which CoreDNS asks first, shardns would
// answer their names as cluster names: that is not mapped.
// Blocks with a chain of their own (chains.go) answer their zone files
// and stub domains without the cluster's names, as CoreDNS asks them
// first: only those of the main chain would be shadowed.
func (c *converter) rootZone(d *Directive) {
	cfg := c.cfg
	if cfg.FilesOutsideBlocks() || len(cfg.Forward.Stubs) > 0 {
		c.unmapped(d.place(), "kubernetes zone \".\" beside server blocks of other zones (zone files, stub domains): "+
			"shardns would answer their names as cluster names; name the cluster domain (kubernetes cluster.local ...)")
		cfg.Kubernetes.Zones = []string{"cluster.local"}
		return
	}
	c.note(d.place(), "kubernetes zone \".\" (the block's zone when the plugin names none): kubernetes.zones: [.], as CoreDNS: "+
		"cluster names are web.ns.svc., and every other name, cluster.local ones included, is NXDOMAIN unless fallthrough "+
		"passes it on; name the cluster domain (kubernetes cluster.local ...) for pods' search paths")
}
