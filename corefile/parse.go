// Package corefile reads CoreDNS's configuration file, the Corefile, and
// converts it to a shardns configuration, so a cluster running CoreDNS
// can move to shardns with its settings (`shardns convert`).
//
// The parser follows CoreDNS's Corefile syntax: server blocks of keys
// ([SCHEME://]ZONE[:PORT]) and a braced list of plugins, each plugin a
// line of words with an optional braced block of its own, comments from
// "#", double-quoted words, snippets ((name) { ... } and import name) and
// environment references ({$NAME}, {%NAME%}).
//
// "import PATTERN" of other files reads them as CoreDNS does when
// Options.Files is set: PATTERN is a file or a glob, relative to the
// directory of the file that holds the import, and the files' words take
// its place, at the top level (server blocks, snippets) or inside a block
// (plugin lines). A glob that matches nothing imports nothing; a missing
// file and a cycle of imports are errors. Every directive keeps the file
// it was written in, so messages name the imported file's lines, and
// Corefile.Sources lists every file read. Without Options.Files, imports
// of files are kept as "import" directives for the converter to report.
package corefile

import (
	"fmt"
	"io/fs"
	"strings"
)

// Corefile is a parsed Corefile.
type Corefile struct {
	// File is the name used in messages ("Corefile:12: ...").
	File string
	// Sources are the files read: File first, then each imported file
	// once, in the order first read, by the path its import resolved to
	// (absolute when Options.Dir is, as SetLocalFiles sets it).
	Sources []string
	// Blocks are the server blocks in the order written; snippets are
	// not among them (their imports are spliced in).
	Blocks []*ServerBlock
	// Imports are the top-level imports left unread: of files when
	// Options.Files is nil or the path holds an unexpanded environment
	// reference, of snippets past the bound on imports.
	Imports []*Directive
}

// ServerBlock is one server block: its keys and its plugins.
type ServerBlock struct {
	Keys []string
	// File is the file the keys are written in (Corefile.File or an
	// imported file) and Line their line there.
	File       string
	Line       int
	Directives []*Directive
}

// Directive is one plugin line, or one line inside a plugin's block.
type Directive struct {
	Name string
	Args []string
	// File is the file the line is written in (Corefile.File or an
	// imported file) and Line its line there.
	File string
	Line int
	// HasBlock is true when braces follow the arguments, even empty ones.
	HasBlock bool
	Block    []*Directive
}

// place is a line of the Corefile or of a file it imports, for
// messages; the zero place is the Corefile as a whole.
type place struct {
	file string
	line int
}

func (d *Directive) place() place   { return place{d.File, d.Line} }
func (b *ServerBlock) place() place { return place{b.File, b.Line} }

// Options changes how a Corefile is read.
type Options struct {
	// Getenv expands {$NAME} and {%NAME%} references. Nil keeps them as
	// written: CoreDNS expands them from its own environment, which the
	// converter does not have, so it reports them instead.
	Getenv func(name string) (string, bool)
	// Files holds the files imports may read, named from its root
	// without the leading slash: an import of /etc/coredns/custom/*.server
	// reads etc/coredns/custom/*.server in Files, so os.DirFS("/") is
	// this machine's files (SetLocalFiles sets Files and Dir so). Nil
	// reads no file: imports of files stay "import" directives, which the
	// converter reports.
	Files fs.FS
	// Dir is the directory of the Corefile in Files, slash-separated
	// ("/etc/coredns"): its relative imports are read from there, those
	// of an imported file from that file's directory. "" is the root.
	Dir string
}

// maxSpliced bounds snippet imports, so snippets importing each other
// cannot grow the input without end, and imports of files (a glob
// counts once), so a tree of files importing each other several times
// cannot either.
const maxSpliced = 1000

// maxSplicedTokens bounds the words imports add in all: each import of
// a snippet or file adds all its words again, to be parsed and kept.
const maxSplicedTokens = 1 << 18

// Parse reads a Corefile. file names it in messages and in Sources.
func Parse(file string, src []byte, opts Options) (*Corefile, error) {
	toks, err := lex(file, src)
	if err != nil {
		return nil, err
	}
	if opts.Getenv != nil {
		if err := expandEnv(toks, opts.Getenv); err != nil {
			return nil, err
		}
	}
	p := &parser{main: file, opts: opts, stack: []*frame{{toks: toks}}, snippets: map[string][]token{},
		sources: []string{file}, imported: map[string][]string{}, budget: maxImportBytes}
	cf := &Corefile{File: file}
	if err := p.parseFile(cf); err != nil {
		return nil, err
	}
	cf.Sources = p.sources
	return cf, nil
}

type parser struct {
	main string // the Corefile's name: its tokens import from Options.Dir
	opts Options
	// stack holds the frames being read, the top one first.
	stack []*frame
	// prev is the token read last, from a frame numbered prevSplice;
	// started is false until there is one.
	prev       token
	prevSplice int
	started    bool
	snippets   map[string][]token
	// splices numbers the frames pushed.
	splices int
	// snippetImports, fileImports and splicedToks count against the
	// bounds on imports.
	snippetImports, fileImports, splicedToks int
	sources                                  []string
	// imported maps each file to the files it imports, to find cycles.
	imported map[string][]string
	// budget is what the imported files may still read, in bytes.
	budget int
}

// errAt is an error at t's file and line; control characters in the
// words it quotes are escaped, so it stays one line of a terminal.
func errAt(t token, format string, args ...any) error {
	return &Error{File: t.file, Line: t.line, Msg: printable(fmt.Sprintf(format, args...))}
}

func (p *parser) parseFile(cf *Corefile) error {
	for !p.eof() {
		if p.is("import") {
			d, err := p.parseImport()
			if err != nil {
				return err
			}
			if d != nil {
				cf.Imports = append(cf.Imports, d)
			}
			continue
		}
		if p.is("}") {
			return errAt(p.cur(), `unexpected "}": no block is open`)
		}
		if p.is("{") {
			return errAt(p.cur(), `"{" without server block keys before it`)
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
	first := p.cur()
	b := &ServerBlock{File: first.file, Line: first.line}
	more := true // the first key, or a key after a trailing comma
	for !p.eof() && !p.is("{") && (more || p.sameLine()) {
		t := p.cur()
		if p.is("}") {
			return nil, errAt(t, `unexpected "}" after server block keys`)
		}
		k, comma := strings.CutSuffix(t.text, ",")
		if !t.quoted && strings.HasSuffix(k, "{") && k != "{" {
			return nil, errAt(t, `%q: put a space before "{"`, t.text)
		}
		if k != "" {
			b.Keys = append(b.Keys, k)
		}
		more = comma
		p.next()
	}
	if !p.is("{") {
		// Without braces the rest of the file is the one server block,
		// as CoreDNS allows for a single server.
		if len(b.Keys) == 0 {
			return nil, errAt(first, "server block without keys")
		}
		ds, err := p.parseDirectives(nil)
		b.Directives = ds
		return b, err
	}
	open := p.cur()
	p.next()
	if len(b.Keys) == 1 && strings.HasPrefix(b.Keys[0], "(") && strings.HasSuffix(b.Keys[0], ")") {
		return nil, p.defineSnippet(strings.TrimSuffix(b.Keys[0][1:], ")"), first, open)
	}
	ds, err := p.parseDirectives(&open)
	b.Directives = ds
	return b, err
}

// parseDirectives reads directives up to the "}" that closes the block
// opened by open, or up to the end of the file when open is nil.
func (p *parser) parseDirectives(open *token) ([]*Directive, error) {
	var out []*Directive
	for {
		if p.eof() {
			if open != nil {
				return out, errAt(*open, `"{" opened here is not closed`)
			}
			return out, nil
		}
		t := p.cur()
		switch {
		case p.is("}"):
			if open == nil {
				return out, errAt(t, `unexpected "}": no block is open`)
			}
			p.next()
			return out, nil
		case p.is("{"):
			return out, errAt(t, `"{" must end the line of the plugin or option it opens`)
		case p.is("import"):
			d, err := p.parseImport()
			if err != nil {
				return out, err
			}
			if d != nil {
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
	t := p.cur()
	d := &Directive{Name: t.text, File: t.file, Line: t.line}
	p.next()
	for p.sameLine() {
		if p.is("}") {
			break // closes the enclosing block: `health { lameduck 5s }`
		}
		if p.is("{") {
			open := p.cur()
			p.next()
			d.HasBlock = true
			block, err := p.parseDirectives(&open)
			d.Block = block
			return d, err
		}
		d.Args = append(d.Args, p.cur().text)
		p.next()
	}
	return d, nil
}

// parseImport handles "import PATTERN": a known snippet, or the files
// PATTERN names when Options.Files is set, are spliced in its place and
// nil returned; any other import is returned as a directive.
func (p *parser) parseImport() (*Directive, error) {
	at := p.cur()
	d := &Directive{Name: "import", File: at.file, Line: at.line}
	p.next()
	for p.sameLine() && !p.is("{") && !p.is("}") {
		d.Args = append(d.Args, p.cur().text)
		p.next()
	}
	switch {
	case len(d.Args) == 1 && p.snippets[d.Args[0]] != nil:
		if p.snippetImports >= maxSpliced {
			return d, nil // left for the converter to report
		}
		p.snippetImports++
		return nil, p.push(at, p.snippets[d.Args[0]])
	case p.opts.Files == nil || len(EnvRefs(strings.Join(d.Args, " "))) > 0:
		// Not read: {$NAME} in a path is from CoreDNS's environment.
		return d, nil
	}
	files, err := p.importFiles(at, d.Args)
	if err != nil {
		return nil, err
	}
	// The first file on top, to be read first.
	for i := len(files) - 1; i >= 0; i-- {
		if err := p.push(at, files[i]); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// defineSnippet stores the tokens up to the "}" that matches open; first
// is the snippet's name.
func (p *parser) defineSnippet(name string, first, open token) error {
	if _, ok := p.snippets[name]; ok {
		return errAt(first, "snippet %q is defined twice", name)
	}
	depth := 1
	body := []token{} // defined, even when empty
	for !p.eof() {
		switch {
		case p.is("{"):
			depth++
		case p.is("}"):
			depth--
		}
		t := p.cur()
		p.next()
		if depth == 0 {
			p.snippets[name] = body
			return nil
		}
		body = append(body, t)
	}
	return errAt(open, `"{" opened here is not closed`)
}
