package corefile

import "strings"

// Alibaba Cloud ACK's Corefile adds two external plugins: kubeapi, an
// API client for other plugins (k8s_event calls it; the kubernetes
// plugin keeps its own connection), and k8s_event, which reports
// CoreDNS's log lines as Kubernetes Events.

// kubeapiPlugin reads kubeapi { endpoint; tls; kubeconfig } as CoreDNS
// does and converts it to nothing: the client it makes serves k8s_event
// alone, and shardns's one connection is the kubernetes plugin's
// (kubernetes.kubeconfig and context).
func (c *converter) kubeapiPlugin(s *server, d *Directive) {
	if len(d.Args) > 0 {
		c.unmapped(d.place(), "kubeapi %s: takes no arguments", strings.Join(d.Args, " "))
		return
	}
	arity := map[string][2]int{"endpoint": {1, 1 << 10}, "tls": {3, 3}, "kubeconfig": {1, 2}}
	c.options(d, func(o *Directive) bool {
		n, ok := arity[o.Name]
		if ok && (len(o.Args) < n[0] || len(o.Args) > n[1]) {
			c.unmapped(o.place(), "kubeapi %s %s: wrong number of arguments, which CoreDNS refuses", o.Name, strings.Join(o.Args, " "))
		}
		return ok
	})
	c.note(d.place(), "kubeapi: the API client of plugins such as k8s_event, not of the kubernetes plugin; "+
		"shardns connects once, with the kubernetes plugin's settings (kubernetes.kubeconfig, context)")
}

// k8sEventPlugin reports k8s_event: shardns does not write its log to
// the Events API.
func (c *converter) k8sEventPlugin(s *server, d *Directive) {
	c.unmapped(d.place(), "k8s_event: shardns does not report its log as Kubernetes Events; "+
		"its errors are in its log (log.errors) and its metrics")
}
