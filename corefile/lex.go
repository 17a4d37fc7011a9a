package corefile

import "fmt"

// token is one word of a Corefile, with the line it starts on.
type token struct {
	text   string
	line   int  // the line the token starts on
	end    int  // the line it ends on (a quoted token may hold newlines)
	quoted bool // written in double quotes: never a brace, comment or keyword
	// splice numbers the snippet import a token was copied in by (0: the
	// file itself), so tokens of a snippet never share a line with the
	// tokens around the import.
	splice int
}

// lex splits src into tokens the way CoreDNS does: words separated by
// white space; "#" at the start of a word begins a comment up to the end
// of the line; a double-quoted word may hold spaces and newlines, with \"
// for a quote (other backslashes are kept as written).
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
			toks = append(toks, token{text: string(word), line: start, end: line, quoted: quoted})
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
		case c == '#' && !inWord:
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

// Error is a syntax error at a line of a Corefile.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }
