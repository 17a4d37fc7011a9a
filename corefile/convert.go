package corefile

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/shardns/shardns/config"
)

// Finding is what the converter says about a line of the Corefile or of
// a file it imports.
type Finding struct {
	// File is the file of the line as the parser names it (the
	// Corefile's name or an imported file's); "" for the Corefile as a
	// whole.
	File string
	// Line in File; 0 for the Corefile as a whole (a plugin that is
	// missing).
	Line int
	// Unmapped is true when the line has no shardns equivalent and was
	// left out; false for a note on how it was mapped.
	Unmapped bool
	Msg      string
}

// Format renders the finding as FILE:LINE: MSG, notes marked "note:";
// file names the Corefile, for findings without a File of their own.
func (f Finding) Format(file string) string {
	if f.Unmapped {
		return f.where(file) + ": " + f.Msg
	}
	return f.where(file) + ": note: " + f.Msg
}

// where is FILE:LINE, or FILE for the Corefile as a whole; f.File, when
// set, takes the place of file.
func (f Finding) where(file string) string {
	if f.File != "" {
		file = f.File
	}
	if f.Line > 0 {
		return fmt.Sprintf("%s:%d", file, f.Line)
	}
	return file
}

// Result is a converted Corefile.
type Result struct {
	// File names the Corefile in findings.
	File string
	// Config is the shardns configuration; config.Parse accepts its YAML.
	Config *config.Config
	// Findings in line order, the Corefile's first and then those of each
	// imported file in Corefile.Sources' order: every plugin or option
	// left out, and notes on mappings that are not one to one.
	Findings []Finding
	// tlsPlaces are the lines of forward's tls options, by the settings
	// they converted to: their files are read where the Corefile is
	// served, and a file that cannot be read names its line.
	tlsPlaces map[config.UpstreamTLSConfig]place
}

// Unmapped counts the findings that left something out.
func (r *Result) Unmapped() int {
	n := 0
	for _, f := range r.Findings {
		if f.Unmapped {
			n++
		}
	}
	return n
}

// converter holds the state of one conversion.
type converter struct {
	cfg      *config.Config
	findings []Finding
	seen     map[Finding]bool
	servers  []*server
	main     *server
	// claimed maps a setting shardns has once (the cache, the forwarder
	// of a zone, ...) to the directive that set it.
	claimed map[string]*Directive
	// done marks directives of settings already applied, for blocks
	// whose keys listen on several ports and so are several servers.
	done map[*Directive]bool
	http []httpCandidate
	// Plugins whose absence changes a default.
	saw          map[string]bool
	errorsLogged bool // errors, or log with class error
	// filePlaces are the lines of files.zones' plugins, in order.
	filePlaces []place
	// stubPlaces and stubBlocks are the lines and blocks of the plugins
	// of forward.stubs, in order.
	stubPlaces []place
	stubBlocks []*ServerBlock
	// kubeBlock is the block of the kubernetes plugin.
	kubeBlock *ServerBlock
	// blockFiles lists the files.zones entries of each block, for its
	// transfer plugin.
	blockFiles map[*ServerBlock][]int
	// deferred checks that need every block read first.
	deferred []func()
	// rank orders the files of findings as Corefile.Sources does.
	rank map[string]int
	// tlsPlaces are the lines of forward's tls options, by what they set.
	tlsPlaces map[config.UpstreamTLSConfig]place
	// viewBlocks are the blocks that become views, in order (views.go).
	viewBlocks []viewBlock
	// entryBlocks are the blocks of the servers[] entries made for
	// chains, by index (chains.go).
	entryBlocks map[int]*ServerBlock
	// err stops the conversion: what CoreDNS would not start with.
	err error
}

// Convert maps a parsed Corefile to a shardns configuration.
func Convert(cf *Corefile) (*Result, error) {
	c := &converter{cfg: config.Default(), seen: map[Finding]bool{}, claimed: map[string]*Directive{},
		done: map[*Directive]bool{}, saw: map[string]bool{}, blockFiles: map[*ServerBlock][]int{},
		rank: map[string]int{}, tlsPlaces: map[config.UpstreamTLSConfig]place{}}
	for i, f := range cf.Sources {
		if _, ok := c.rank[f]; !ok {
			c.rank[f] = i
		}
	}
	// CoreDNS stops at once unless health has a lameduck.
	c.cfg.HTTP.Lameduck = 0
	if len(cf.Blocks) == 0 {
		return nil, fmt.Errorf("%s: no server blocks", cf.File)
	}
	for _, d := range cf.Imports {
		c.topImport(d)
	}
	unfiltered := *cf
	unfiltered.Blocks = c.splitViews(cf)
	if err := c.setupServers(&unfiltered); err != nil {
		return nil, err
	}
	for _, s := range c.ordered() {
		if s.skip {
			continue
		}
		chain := c.needsChain(s)
		for _, d := range sortedDirectives(s.block.Directives) {
			if !chain || !chainPlugins[d.Name] {
				c.directive(s, d)
			}
		}
		if chain {
			c.convertChain(s)
		}
	}
	for _, f := range c.deferred {
		f()
	}
	c.convertViews()
	if c.err != nil {
		return nil, c.err
	}
	c.finish()
	// After finish, which knows whether a kubernetes plugin was read:
	// without one no cluster zone shadows a stub.
	c.dropShadowedStubs()
	sort.SliceStable(c.findings, func(i, j int) bool {
		a, b := c.findings[i], c.findings[j]
		if c.rank[a.File] != c.rank[b.File] {
			return c.rank[a.File] < c.rank[b.File]
		}
		return a.Line < b.Line
	})
	return &Result{File: cf.File, Config: c.cfg, Findings: c.findings, tlsPlaces: c.tlsPlaces}, nil
}

func (c *converter) add(f Finding) {
	f.Msg = printable(f.Msg)
	if !c.seen[f] {
		c.seen[f] = true
		c.findings = append(c.findings, f)
	}
}

func (c *converter) unmapped(at place, format string, args ...any) {
	c.add(Finding{File: at.file, Line: at.line, Unmapped: true, Msg: fmt.Sprintf(format, args...)})
}

func (c *converter) note(at place, format string, args ...any) {
	c.add(Finding{File: at.file, Line: at.line, Msg: fmt.Sprintf(format, args...)})
}

// topImport reports an import between server blocks that was not read.
func (c *converter) topImport(d *Directive) {
	if refs := directiveEnvRefs(d); len(refs) > 0 {
		c.unmapped(d.place(), "import %s: the path uses the environment variable %s, which CoreDNS reads from its own environment: write the value, or run convert with --expand-env",
			strings.Join(d.Args, " "), refs[0])
		return
	}
	c.unmapped(d.place(), "import %s: other files are not read; paste their content into the Corefile", strings.Join(d.Args, " "))
}

// ordered lists the servers with the main one first: its plugins set
// what shardns has once, as the root server block of a cluster does.
func (c *converter) ordered() []*server {
	out := make([]*server, 0, len(c.servers))
	if c.main != nil {
		out = append(out, c.main)
	}
	for _, s := range c.servers {
		if s != c.main {
			out = append(out, s)
		}
	}
	return out
}

// order puts the plugins that change how others are read first (bind,
// root) and transfer, which completes the file zones, last. CoreDNS runs
// plugins in its own fixed order, not the order written.
var order = map[string]int{"bind": -2, "root": -1, "transfer": 1}

func sortedDirectives(ds []*Directive) []*Directive {
	out := append([]*Directive(nil), ds...)
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Name] < order[out[j].Name] })
	return out
}

// handler maps one plugin of a server block.
type handler func(c *converter, s *server, d *Directive)

// perServer plugins apply to the listener of each server a block makes;
// the others set something shardns has once, and are applied once.
var perServer = map[string]bool{"bind": true, "root": true, "tls": true, "whoami": true}

func (c *converter) directive(s *server, d *Directive) {
	if refs := directiveEnvRefs(d); len(refs) > 0 {
		c.unmapped(d.place(), "plugin %q uses the environment variable %s, which CoreDNS reads from its own environment: write the value, or run convert with --expand-env", d.Name, refs[0])
		return
	}
	if !printableWords(d) {
		c.unmapped(d.place(), "plugin %q has a word with a control character or invalid UTF-8", d.Name)
		return
	}
	if !perServer[d.Name] {
		if c.done[d] {
			return
		}
		c.done[d] = true
	}
	h, ok := handlers[d.Name]
	if !ok {
		c.unmapped(d.place(), "plugin %q has no shardns equivalent", d.Name)
		return
	}
	c.saw[d.Name] = true
	h(c, s, d)
}

// handlers maps the plugins shardns has an equivalent of.
var handlers = map[string]handler{
	"bind": func(*converter, *server, *Directive) {}, // read by setupServers
	"root": func(*converter, *server, *Directive) {}, // read by setupServers
	"import": func(c *converter, _ *server, d *Directive) {
		c.unmapped(d.place(), "import %s: other files and unknown snippets are not read; paste their content into the Corefile", strings.Join(d.Args, " "))
	},
	"errors": (*converter).errorsPlugin, "log": (*converter).logPlugin,
	"health": (*converter).healthPlugin, "ready": (*converter).readyPlugin,
	"prometheus": (*converter).prometheusPlugin, "loadbalance": (*converter).loadbalancePlugin,
	"loop": (*converter).loopPlugin, "reload": (*converter).reloadPlugin,
	"chaos": (*converter).chaosPlugin, "autopath": (*converter).autopathPlugin,
	"any": (*converter).anyPlugin, "whoami": (*converter).whoamiPlugin, "tls": (*converter).tlsPlugin,
	"kubernetes": (*converter).kubernetesPlugin, "forward": (*converter).forwardPlugin,
	"proxy": (*converter).proxyPlugin, "cache": (*converter).cachePlugin,
	"file": (*converter).filePlugin, "transfer": (*converter).transferPlugin,
	"hosts": (*converter).hostsPlugin, "rewrite": (*converter).rewritePlugin,
	"federation": (*converter).federationPlugin, "acl": (*converter).aclPlugin,
	"template": (*converter).templatePlugin,
	"bufsize":  (*converter).bufsizePlugin, "nsid": (*converter).nsidPlugin, "header": (*converter).headerPlugin,
	"dns64": (*converter).dns64Plugin, "timeouts": (*converter).timeoutsPlugin,
	"k8s_external": (*converter).externalPlugin, "view": (*converter).viewPlugin,
	"rrl": (*converter).rrlPlugin, "kubeapi": (*converter).kubeapiPlugin, "k8s_event": (*converter).k8sEventPlugin,
	"k8s_gateway": (*converter).gatewayPlugin,
}

// claim records d as the directive that sets key, which shardns has once
// for every server block. It reports whether d is the first; a later
// directive that differs is reported as not mapped.
func (c *converter) claim(key string, d *Directive, what string) bool {
	prev, ok := c.claimed[key]
	if !ok {
		c.claimed[key] = d
		return true
	}
	if canonical(prev) != canonical(d) {
		c.unmapped(d.place(), "%s differs from %s: shardns has one %s for every server block", d.Name, lineOf(prev, d), what)
	}
	return false
}

// lineOf names the line of d, "line N" when it is in the file of from.
func lineOf(d, from *Directive) string {
	if d.File == from.File || d.File == "" {
		return fmt.Sprintf("line %d", d.Line)
	}
	return fmt.Sprintf("%s:%d", d.File, d.Line)
}

// global notes that a plugin of a block other than the main one applies
// to every server block in shardns, unless the main block has the same.
func (c *converter) global(s *server, d *Directive, key string) {
	if s == c.main || c.main == nil {
		return
	}
	for _, m := range c.main.block.Directives {
		if m.Name == d.Name && canonical(m) == canonical(d) {
			return
		}
	}
	c.note(d.place(), "%s in server block %q applies to every server block in shardns (%s)", d.Name, strings.Join(s.block.Keys, " "), key)
}

// canonical is a directive as one string, to compare two directives.
func canonical(d *Directive) string {
	var b strings.Builder
	b.WriteString(strings.Join(append([]string{d.Name}, d.Args...), " "))
	if d.HasBlock {
		b.WriteString(" {")
		for _, sub := range d.Block {
			b.WriteString(canonical(sub) + ";")
		}
		b.WriteString("}")
	}
	return b.String()
}

// printableWords reports whether every word of d, its block included, is
// text a YAML value can hold.
func printableWords(d *Directive) bool {
	for _, w := range append([]string{d.Name}, d.Args...) {
		if printable(w) != w {
			return false
		}
	}
	for _, sub := range d.Block {
		if !printableWords(sub) {
			return false
		}
	}
	return true
}

func directiveEnvRefs(d *Directive) []string {
	var refs []string
	for _, w := range append([]string{d.Name}, d.Args...) {
		for _, n := range EnvRefs(w) {
			refs = append(refs, "{$"+n+"}")
		}
	}
	for _, sub := range d.Block {
		refs = append(refs, directiveEnvRefs(sub)...)
	}
	return refs
}

// options calls f for each line of d's block; f reports whether it knew
// the option, and unknown options are reported as not mapped.
func (c *converter) options(d *Directive, f func(o *Directive) bool) {
	for _, o := range d.Block {
		if !f(o) {
			c.unmapped(o.place(), "%s option %q has no shardns equivalent", d.Name, o.Name)
		}
	}
}

// finish sets what follows from plugins that were not written, and the
// HTTP address.
func (c *converter) finish() {
	cfg := c.cfg
	if !c.errorsLogged {
		cfg.Log.Errors = false
		c.note(place{}, "no errors plugin: log.errors: false")
	}
	if !c.saw["cache"] {
		cfg.Cache.Enabled = false
		c.note(place{}, "no cache plugin: cache.enabled: false")
	}
	if capHostsTTL(cfg, cfg.Cache.Enabled) {
		c.note(place{}, "hosts answers pass through cache first in CoreDNS, which caps their TTL: hosts.ttl: %d", cfg.Hosts.TTL)
	}
	if !c.saw["loadbalance"] {
		cfg.LoadBalance.Enabled = false
		c.note(place{}, "no loadbalance plugin: loadbalance.enabled: false")
	}
	if !c.saw["kubernetes"] {
		cfg.Kubernetes.Enabled = false
		cfg.Kubernetes.Zones, cfg.Kubernetes.ReverseZones = []string{}, []string{}
		c.note(place{}, "no kubernetes plugin: kubernetes.enabled: false, kubernetes.zones: [], kubernetes.reverseZones: []")
	}
	c.dropClusterFileZones()
	if _, ok := c.claimed["forward ."]; !ok {
		cfg.Forward.Upstreams = []string{}
		c.note(place{}, "no forward plugin for the root zone: forward.upstreams: [] (names outside every zone get REFUSED)")
	}
	if cfg.HTTP.Lameduck == 0 {
		c.note(place{}, "no health lameduck: http.lameduck: 0s (on SIGTERM the listeners close at once)")
	}
	c.finishHTTP()
}

// printable escapes control characters and invalid UTF-8 that Corefile
// words may hold, so a finding stays one line of a terminal or a YAML
// comment.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfeff:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
