package corefile

import "fmt"

// token is one word of a Corefile, with the line it starts on.
type token struct {
	text   string
	line   int  // the line the token starts on
	end    int  // the line it ends on (a quoted token may hold newlines)
	quoted bool // written in double quotes: never a brace, comment or keyword
	// file names the file the token was written in: the Corefile or a
	// file it imports, for messages and for resolving relative imports.
	file string
}

// lex splits src into tokens the way CoreDNS does: words separated by
// white space; any "#" outside quotes begins a comment up to the end of
// the line, in the middle of a word too (`foo#bar` is the word `foo`, as
// CoreDNS's lexer reads it); a double-quoted word may hold spaces and
// newlines, with \" for a quote (other backslashes are kept as written).
func lex(file string, src []byte) ([]token, error) {
	var (
		toks   []token
		word   []byte
		start  int // line of the word being read
		inWord bool
		quoted bool
		quoteL int // line a quoted word opened on
		line   = 1
	)
	flush := func() {
		if inWord {
			toks = append(toks, token{text: string(word), line: start, end: line, quoted: quoted, file: file})
		}
		word, inWord, quoted = word[:0], false, false
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if quoted {
			switch {
			case c == '\\' && i+1 < len(src) && src[i+1] == '"':
				word = append(word, '"')
				i++
			case c == '"':
				// A quoted word ends at its closing quote, even when a
				// letter follows: CoreDNS reads `"a"b` as two words.
				flush()
			default:
				if c == '\n' {
					line++
				}
				word = append(word, c)
			}
			continue
		}
		switch {
		case c == '\n':
			flush()
			line++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			flush()
		case c == '#':
			// The word read so far ends at the newline the loop reaches
			// next, so it keeps its line.
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i-- // the newline is handled by the loop
		case c == '"' && !inWord:
			inWord, quoted, start, quoteL = true, true, line, line
		default:
			if !inWord {
				inWord, start = true, line
			}
			word = append(word, c)
		}
	}
	if quoted {
		return nil, &Error{File: file, Line: quoteL, Msg: "quoted string opened here is not closed"}
	}
	flush()
	return toks, nil
}

// frame is a list of tokens the parser reads: the Corefile's, or those
// of a snippet or file an import splices in. Imports push frames instead
// of copying tokens into one list, so each costs the same however long
// the input.
type frame struct {
	toks []token
	i    int
	// splice numbers the import that pushed the frame (0: the Corefile),
	// so its tokens never share a line with those around the import.
	splice int
}

// eof reports whether every token is read, dropping the frames read to
// their end.
func (p *parser) eof() bool {
	for len(p.stack) > 0 {
		if top := p.top(); top.i < len(top.toks) {
			return false
		}
		p.stack = p.stack[:len(p.stack)-1]
	}
	return true
}

func (p *parser) top() *frame { return p.stack[len(p.stack)-1] }

// cur is the current token; eof must be false.
func (p *parser) cur() token { top := p.top(); return top.toks[top.i] }

// next moves past the current token; eof must be false.
func (p *parser) next() {
	top := p.top()
	p.prev, p.prevSplice, p.started = top.toks[top.i], top.splice, true
	top.i++
}

// is reports whether the current token is the unquoted word w.
func (p *parser) is(w string) bool {
	if p.eof() {
		return false
	}
	t := p.cur()
	return !t.quoted && t.text == w
}

// sameLine reports whether the current token is on the line where the
// previous one ends.
func (p *parser) sameLine() bool {
	if !p.started || p.eof() {
		return false
	}
	return p.prevSplice == p.top().splice && p.prev.end == p.cur().line
}

// push makes toks, which the import at at splices in, the next tokens
// read.
func (p *parser) push(at token, toks []token) error {
	p.splicedToks += len(toks)
	if p.splicedToks > maxSplicedTokens {
		return errAt(at, "imports add more than %d words", maxSplicedTokens)
	}
	p.eof() // a snippet importing itself last must not deepen the stack
	p.splices++
	p.stack = append(p.stack, &frame{toks: toks, splice: p.splices})
	return nil
}

// Error is an error at a line of a Corefile, or of a file it imports
// (File names which).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }
