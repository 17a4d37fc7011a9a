// Package corefile reads CoreDNS's configuration file, the Corefile, and
// converts it to a shardns configuration, so a cluster running CoreDNS
// can move to shardns with its settings (`shardns convert`).
//
// The parser follows CoreDNS's Corefile syntax: server blocks of keys
// ([SCHEME://]ZONE[:PORT]) and a braced list of plugins, each plugin a
// line of words with an optional braced block of its own, comments from
// "#", double-quoted words, snippets ((name) { ... } and import name) and
// environment references ({$NAME}, {%NAME%}). Imports of other files are
// kept as "import" directives for the converter to report: it converts
// one file.
package corefile

import (
	"fmt"
	"strings"
)

// Corefile is a parsed Corefile.
type Corefile struct {
	// File is the name used in messages ("Corefile:12: ...").
	File string
	// Blocks are the server blocks in the order written; snippets are
	// not among them (their imports are spliced in).
	Blocks []*ServerBlock
	// Imports are top-level imports of other files, which are not read.
	Imports []*Directive
}

// ServerBlock is one server block: its keys and its plugins.
type ServerBlock struct {
	Keys       []string
	Line       int
	Directives []*Directive
}

// Directive is one plugin line, or one line inside a plugin's block.
type Directive struct {
	Name string
	Args []string
	Line int
	// HasBlock is true when braces follow the arguments, even empty ones.
	HasBlock bool
	Block    []*Directive
}

// Options changes how a Corefile is read.
type Options struct {
	// Getenv expands {$NAME} and {%NAME%} references. Nil keeps them as
	// written: CoreDNS expands them from its own environment, which the
	// converter does not have, so it reports them instead.
	Getenv func(name string) (string, bool)
}

// maxSpliced bounds snippet imports, so snippets importing each other
// cannot grow the input without end.
const maxSpliced = 1000

// Parse reads a Corefile. file names it in errors.
func Parse(file string, src []byte, opts Options) (*Corefile, error) {
	toks, err := lex(file, src)
	if err != nil {
		return nil, err
	}
	p := &parser{file: file, toks: toks, snippets: map[string][]token{}}
	if opts.Getenv != nil {
		if err := p.expandEnv(opts.Getenv); err != nil {
			return nil, err
		}
	}
	cf := &Corefile{File: file}
	if err := p.parseFile(cf); err != nil {
		return nil, err
	}
	return cf, nil
}

type parser struct {
	file     string
	toks     []token
	pos      int
	snippets map[string][]token
	spliced  int
}

func (p *parser) errf(line int, format string, args ...any) error {
	return &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) eof() bool { return p.pos >= len(p.toks) }

// is reports whether the current token is the unquoted word w.
func (p *parser) is(w string) bool {
	return !p.eof() && !p.toks[p.pos].quoted && p.toks[p.pos].text == w
}

// sameLine reports whether the current token is on the line where the
// previous one ends.
func (p *parser) sameLine() bool {
	if p.eof() || p.pos == 0 {
		return false
	}
	prev, cur := p.toks[p.pos-1], p.toks[p.pos]
	return prev.splice == cur.splice && prev.end == cur.line
}

func (p *parser) parseFile(cf *Corefile) error {
	for !p.eof() {
		if p.is("import") {
			if d := p.parseImport(); d != nil {
				cf.Imports = append(cf.Imports, d)
			}
			continue
		}
		if p.is("}") {
			return p.errf(p.toks[p.pos].line, `unexpected "}": no block is open`)
		}
		if p.is("{") {
			return p.errf(p.toks[p.pos].line, `"{" without server block keys before it`)
		}
		b, err := p.parseBlock()
		if err != nil {
			return err
		}
		if b != nil {
			cf.Blocks = append(cf.Blocks, b)
		}
	}
	return nil
}

// parseBlock reads the keys of a server block and its body; a snippet
// definition is stored and nil returned.
func (p *parser) parseBlock() (*ServerBlock, error) {
	b := &ServerBlock{Line: p.toks[p.pos].line}
	more := true // the first key, or a key after a trailing comma
	for !p.eof() && !p.is("{") && (more || p.sameLine()) {
		t := p.toks[p.pos]
		if p.is("}") {
			return nil, p.errf(t.line, `unexpected "}" after server block keys`)
		}
		k, comma := strings.CutSuffix(t.text, ",")
		if !t.quoted && strings.HasSuffix(k, "{") && k != "{" {
			return nil, p.errf(t.line, `%q: put a space before "{"`, t.text)
		}
		if k != "" {
			b.Keys = append(b.Keys, k)
		}
		more = comma
		p.pos++
	}
	if !p.is("{") {
		// Without braces the rest of the file is the one server block,
		// as CoreDNS allows for a single server.
		if len(b.Keys) == 0 {
			return nil, p.errf(b.Line, "server block without keys")
		}
		ds, err := p.parseDirectives(0)
		b.Directives = ds
		return b, err
	}
	open := p.toks[p.pos].line
	p.pos++
	if len(b.Keys) == 1 && strings.HasPrefix(b.Keys[0], "(") && strings.HasSuffix(b.Keys[0], ")") {
		return nil, p.defineSnippet(strings.TrimSuffix(b.Keys[0][1:], ")"), b.Line, open)
	}
	ds, err := p.parseDirectives(open)
	b.Directives = ds
	return b, err
}

// parseDirectives reads directives up to the "}" that closes a block
// opened on line open, or up to the end of the file when open is 0.
func (p *parser) parseDirectives(open int) ([]*Directive, error) {
	var out []*Directive
	for {
		if p.eof() {
			if open > 0 {
				return out, p.errf(open, `"{" opened here is not closed`)
			}
			return out, nil
		}
		t := p.toks[p.pos]
		switch {
		case p.is("}"):
			if open == 0 {
				return out, p.errf(t.line, `unexpected "}": no block is open`)
			}
			p.pos++
			return out, nil
		case p.is("{"):
			return out, p.errf(t.line, `"{" must end the line of the plugin or option it opens`)
		case p.is("import"):
			if d := p.parseImport(); d != nil {
				out = append(out, d)
			}
			continue
		}
		d, err := p.parseDirective()
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

// parseDirective reads a name, the words after it on its line and, when
// the line ends in "{", its block.
func (p *parser) parseDirective() (*Directive, error) {
	t := p.toks[p.pos]
	d := &Directive{Name: t.text, Line: t.line}
	p.pos++
	for p.sameLine() {
		if p.is("}") {
			break // closes the enclosing block: `health { lameduck 5s }`
		}
		if p.is("{") {
			open := p.toks[p.pos].line
			p.pos++
			d.HasBlock = true
			block, err := p.parseDirectives(open)
			d.Block = block
			return d, err
		}
		d.Args = append(d.Args, p.toks[p.pos].text)
		p.pos++
	}
	return d, nil
}

// parseImport handles "import NAME": a known snippet is spliced in place
// and nil returned; anything else is returned as a directive.
func (p *parser) parseImport() *Directive {
	start := p.pos
	d := &Directive{Name: "import", Line: p.toks[p.pos].line}
	p.pos++
	for p.sameLine() && !p.is("{") && !p.is("}") {
		d.Args = append(d.Args, p.toks[p.pos].text)
		p.pos++
	}
	if len(d.Args) != 1 || p.snippets[d.Args[0]] == nil || p.spliced >= maxSpliced {
		return d
	}
	p.spliced++
	body := make([]token, len(p.snippets[d.Args[0]]))
	for i, t := range p.snippets[d.Args[0]] {
		t.splice = p.spliced
		body[i] = t
	}
	rest := append(body, p.toks[p.pos:]...)
	p.toks = append(p.toks[:start:start], rest...)
	p.pos = start
	return nil
}

// defineSnippet stores the tokens up to the "}" that matches the one
// opened on line open.
func (p *parser) defineSnippet(name string, line, open int) error {
	if _, ok := p.snippets[name]; ok {
		return p.errf(line, "snippet %q is defined twice", name)
	}
	depth := 1
	start := p.pos
	for ; !p.eof(); p.pos++ {
		switch {
		case p.is("{"):
			depth++
		case p.is("}"):
			depth--
		}
		if depth == 0 {
			body := p.toks[start:p.pos]
			if len(body) == 0 {
				body = []token{} // defined, even when empty
			}
			p.snippets[name] = body
			p.pos++
			return nil
		}
	}
	return p.errf(open, `"{" opened here is not closed`)
}

// expandEnv replaces {$NAME} and {%NAME%} in every token.
func (p *parser) expandEnv(getenv func(string) (string, bool)) error {
	for i := range p.toks {
		t := &p.toks[i]
		out, err := expand(t.text, getenv)
		if err != nil {
			return p.errf(t.line, "%v", err)
		}
		if out != t.text {
			// An expanded value is a plain word, never a brace or keyword.
			t.text, t.quoted = out, true
		}
	}
	return nil
}

func expand(s string, getenv func(string) (string, bool)) (string, error) {
	var err error
	out := envRefs(s, func(name string) string {
		v, ok := getenv(name)
		if !ok && err == nil {
			err = fmt.Errorf("environment variable %s is not set", name)
		}
		return v
	})
	return out, err
}

// envRefs calls f for each {$NAME} or {%NAME%} in s and puts its result
// in place of the reference.
func envRefs(s string, f func(name string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "{")
		if i < 0 || i+1 >= len(s) || (s[i+1] != '$' && s[i+1] != '%') {
			if i < 0 {
				b.WriteString(s)
				return b.String()
			}
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		closing := "}"
		if s[i+1] == '%' {
			closing = "%}"
		}
		j := strings.Index(s[i+2:], closing)
		if j <= 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(f(s[i+2 : i+2+j]))
		s = s[i+2+j+len(closing):]
	}
}

// EnvRefs lists the environment references ({$NAME}, {%NAME%}) in s.
func EnvRefs(s string) []string {
	var names []string
	envRefs(s, func(name string) string { names = append(names, name); return "" })
	return names
}
