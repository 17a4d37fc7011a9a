package node

import (
	"fmt"
	"log/slog"
	"net"
	"slices"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/listeners"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
)

// A listener serves one address over one transport. dns.listen addresses
// answer every name; servers[] entries add listeners limited to zones, as
// Corefile server blocks are. Entries on one address share its listener
// and split the zones between them (config validation has rejected
// entries that disagree on the transport, the certificate or a zone).

// listenerSpec is one listener a configuration asks for.
type listenerSpec struct {
	key       string // names the listener across reloads
	listenKey string // the config key that binds it, for errors
	tlsKey    string // the config key of its certificate
	addr      string
	transport string // dns, tls or https
	blocks    []listeners.Block
	// chains are the servers[] index of each block with a chain of its
	// own, in blocks' order; -1 for a block answered by the top level.
	chains []int
	tls    config.TLSConfig
	path   string
}

// listenerSpecs lists the listeners of cfg: dns.listen first, then the
// servers[] entries merged by address.
func listenerSpecs(cfg *config.Config) []*listenerSpec {
	var out []*listenerSpec
	byKey := map[string]*listenerSpec{}
	add := func(sp *listenerSpec, b listeners.Block, chain int) {
		if have := byKey[sp.key]; have != nil {
			have.blocks = append(have.blocks, b)
			have.chains = append(have.chains, chain)
			return
		}
		sp.blocks, sp.chains = []listeners.Block{b}, []int{chain}
		byKey[sp.key] = sp
		out = append(out, sp)
	}
	for _, addr := range cfg.DNS.Listen {
		if byKey[dnsListenKey(addr)] == nil { // a repeated address is one listener
			add(&listenerSpec{key: dnsListenKey(addr), listenKey: "dns.listen", addr: addr, transport: "dns"},
				listeners.Block{Zones: []string{"."}}, -1)
		}
	}
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		for j, addr := range s.Listen {
			add(&listenerSpec{key: serverKey(s.Transport, addr, i, j), listenKey: fmt.Sprintf("servers[%d].listen[%d]", i, j),
				tlsKey: fmt.Sprintf("servers[%d].tls", i), addr: addr, transport: s.Transport, tls: s.TLS, path: s.Path},
				listeners.Block{Zones: s.Zones, Whoami: s.Whoami}, chainIndex(s, i))
		}
	}
	return out
}

func dnsListenKey(addr string) string { return "dns://" + addr }

// serverKey names the listener of servers[i].listen[j]: entries on one
// address share it (plain ones with dns.listen too), while port 0 binds a
// port of its own for every entry.
func serverKey(transport, addr string, i, j int) string {
	key := transport + "://" + addr
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		key += fmt.Sprintf("#servers[%d].listen[%d]", i, j)
	}
	return key
}

// chainIndex is i when servers[i] has a chain of its own, else -1.
func chainIndex(s *config.ServerConfig, i int) int {
	if s.Chain == nil {
		return -1
	}
	return i
}

// scope is what the listener of sp answers, each block with a chain of
// its own answered through that chain's handler of c.
func (sp *listenerSpec) scope(c *core, server string, m *metrics.All) *listeners.Scope {
	blocks := slices.Clone(sp.blocks)
	for i, chain := range sp.chains {
		if chain >= 0 {
			blocks[i].Handler = c.blockHandler(chain, server, m)
		}
	}
	return listeners.NewScope(blocks, sp.path)
}

// bindListener opens the sockets of sp and reads its certificate, so that
// a port in use or a broken certificate is an error naming the key.
// Shared (a node-local process), plain DNS binds beside a process being
// replaced (sharedaddr.go).
func bindListener(sp *listenerSpec, shared bool, log *slog.Logger) (*listenerEntry, error) {
	e := &listenerEntry{spec: sp}
	if sp.transport == "dns" {
		bind := listeners.Bind
		if shared {
			bind = listeners.BindShared
		}
		s, err := bind(sp.addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.listenKey, err)
		}
		e.sockets = s
		return e, nil
	}
	cert, err := listeners.LoadCertificate(sp.tls.CertFile, sp.tls.KeyFile, log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.tlsKey, err)
	}
	s, err := listeners.BindTCP(sp.addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.listenKey, err)
	}
	e.sockets, e.cert = s, cert
	return e, nil
}

// listenerHandler is the handler of c for one listener, its metrics
// labelled with the transport as CoreDNS does (dns://, tls://, https://).
func (n *Node) listenerHandler(e *listenerEntry, c *core) *query.Handler {
	return c.handler(n.serverLabel(e), n.metrics)
}

// listenerScope is the scope of one listener under c.
func (n *Node) listenerScope(e *listenerEntry, c *core) *listeners.Scope {
	return e.spec.scope(c, n.serverLabel(e), n.metrics)
}

// serverLabel is the server label of a listener's metrics.
func (n *Node) serverLabel(e *listenerEntry) string {
	return e.spec.transport + "://" + e.sockets.Addr()
}

// listenerChanges is what a reload does to the listeners, prepared before
// anything changes so that an error leaves them all as they were.
type listenerChanges struct {
	specs map[string]*listenerSpec          // every listener of the new configuration
	added map[string]*listenerEntry         // bound, not started
	certs map[string]*listeners.Certificate // loaded for listeners whose files changed
}

// prepareListeners binds the listeners cfg adds and loads the
// certificates whose files it changes.
func (n *Node) prepareListeners(cfg *config.Config) (*listenerChanges, error) {
	ch := &listenerChanges{specs: map[string]*listenerSpec{}, added: map[string]*listenerEntry{},
		certs: map[string]*listeners.Certificate{}}
	for _, sp := range listenerSpecs(cfg) {
		ch.specs[sp.key] = sp
		if err := n.prepareListener(sp, ch); err != nil {
			ch.abandon()
			return nil, err
		}
	}
	return ch, nil
}

func (n *Node) prepareListener(sp *listenerSpec, ch *listenerChanges) error {
	e := n.listeners[sp.key]
	if e == nil {
		added, err := bindListener(sp, n.nodeLocal, n.log)
		if err != nil {
			return n.explainBindError(sp, err)
		}
		ch.added[sp.key] = added
		return nil
	}
	if e.cert == nil {
		return nil
	}
	if certFile, keyFile := e.cert.Files(); certFile == sp.tls.CertFile && keyFile == sp.tls.KeyFile {
		return nil
	}
	cert, err := listeners.LoadCertificate(sp.tls.CertFile, sp.tls.KeyFile, n.log)
	if err != nil {
		return fmt.Errorf("%s: %w", sp.tlsKey, err)
	}
	ch.certs[sp.key] = cert
	return nil
}

// explainBindError names the likely cause when a reload moves an address
// to another transport: the running listener still holds the port.
func (n *Node) explainBindError(sp *listenerSpec, err error) error {
	for _, e := range n.listeners {
		if e.spec.addr == sp.addr && e.spec.transport != sp.transport {
			return fmt.Errorf("%w (%s is served over %s now: changing the transport of an address needs a restart)",
				err, sp.addr, e.spec.transport)
		}
	}
	return err
}

// abandon closes the sockets of a reload that failed.
func (ch *listenerChanges) abandon() {
	for _, e := range ch.added {
		e.sockets.Close()
	}
}

// applyListeners moves the listeners to the new core c: kept ones switch
// handler, scope and certificate in place, removed ones stop, added ones
// start. n.cfg is already the new configuration.
func (n *Node) applyListeners(ch *listenerChanges, c *core) {
	for key, e := range n.listeners {
		sp := ch.specs[key]
		if sp == nil {
			n.system.Root.StopFuture(e.pid).Wait() // closes its sockets
			e.sockets.Close()
			delete(n.listeners, key)
			continue
		}
		e.spec = sp
		if cert := ch.certs[key]; cert != nil {
			e.cert.Replace(cert)
		}
		e.handler.Store(n.listenerHandler(e, c))
		e.scope.Store(n.listenerScope(e, c))
		e.limiter.Configure(n.cfg.DNS.RateLimit.PerSecond, n.cfg.DNS.RateLimit.Burst)
		e.rrl.Configure(rrlConfig(n.cfg.DNS.RRL))
	}
	for key, e := range ch.added {
		n.listeners[key] = e
		n.startListener(e, c)
	}
}

// ServerAddrs lists the addresses servers[i] is bound to, in the order of
// its listen list (useful with port 0).
func (n *Node) ServerAddrs(i int) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i < 0 || i >= len(n.cfg.Servers) {
		return nil
	}
	s := n.cfg.Servers[i]
	var out []string
	for j, addr := range s.Listen {
		if e := n.listeners[serverKey(s.Transport, addr, i, j)]; e != nil {
			out = append(out, e.sockets.Addr())
		}
	}
	return out
}
