package corefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// maxImportBytes bounds what imported files read in all: a Corefile is
// small, and a device or a huge file named by mistake must not be read
// to its end.
const maxImportBytes = 8 << 20

// SetLocalFiles makes imports read this machine's files: Files is its
// root, and relative imports of the Corefile at corefile are read from
// corefile's directory (from the working directory when corefile is "",
// a Corefile read from standard input). Imported files are then named by
// their absolute paths in messages and in Corefile.Sources.
func (o *Options) SetLocalFiles(corefile string) error {
	dir, err := filepath.Abs(filepath.Dir(corefile))
	if err != nil {
		return err
	}
	vol := filepath.VolumeName(dir)
	o.Files = os.DirFS(vol + string(filepath.Separator))
	o.Dir = filepath.ToSlash(dir[len(vol):])
	return nil
}

// importFiles reads the files that the import at at names, each split
// into tokens, for the caller to splice in its place.
func (p *parser) importFiles(at token, args []string) ([][]token, error) {
	if len(args) != 1 || args[0] == "" {
		return nil, errAt(at, "import takes one file, glob pattern or snippet name")
	}
	pattern := args[0]
	if p.fileImports >= maxSpliced {
		return nil, errAt(at, "import %s: more than %d imports of files", pattern, maxSpliced)
	}
	p.fileImports++
	names, err := p.match(at, pattern)
	if err != nil {
		return nil, err
	}
	var out [][]token
	for _, name := range names {
		if err := p.link(at, pattern, name); err != nil {
			return nil, err
		}
		toks, err := p.readImport(at, pattern, name)
		if err != nil {
			return nil, err
		}
		out = append(out, toks)
	}
	return out, nil
}

// match lists the files pattern names: a plain path, whether it exists
// or not (reading says), or what a glob matches, in sorted order.
func (p *parser) match(at token, pattern string) ([]string, error) {
	if !strings.ContainsAny(pattern, "*?[") {
		return []string{p.resolve(at, pattern, false)}, nil
	}
	// CoreDNS refuses patterns whose matching can take long.
	if strings.Count(pattern, "*") > 1 || strings.Count(pattern, "?") > 1 ||
		(strings.Contains(pattern, "[") && strings.Contains(pattern, "]")) {
		return nil, errAt(at, "import %s: a glob pattern may hold one * and one ?, and no [...]", pattern)
	}
	full := p.resolve(at, pattern, true)
	found, err := fs.Glob(p.opts.Files, fsName(full))
	if err != nil {
		return nil, errAt(at, "import %s: %v", pattern, err)
	}
	slices.Sort(found)
	if path.IsAbs(full) {
		for i, f := range found {
			found[i] = "/" + f
		}
	}
	return found, nil
}

// resolve is pattern read from the directory of the file that imports
// it: Options.Dir for the Corefile.
func (p *parser) resolve(at token, pattern string, glob bool) string {
	if path.IsAbs(pattern) {
		return path.Clean(pattern)
	}
	dir := p.opts.Dir
	if at.file != p.main {
		dir = path.Dir(at.file)
	}
	if glob {
		dir = escapeGlob(dir) // a name, not a pattern, whatever it holds
	}
	return path.Join(dir, pattern)
}

// link records that at's file imports name, which pattern matched. An
// import of a file that imports the importing file, directly or through
// others, is an error: splicing it would never end.
func (p *parser) link(at token, pattern, name string) error {
	if chain := p.chain(name, at.file, map[string]bool{}); chain != nil {
		cycle := append([]string{at.file}, chain...)
		return errAt(at, "import %s: a cycle of imports: %s", pattern, strings.Join(cycle, " -> "))
	}
	if !slices.Contains(p.imported[at.file], name) {
		p.imported[at.file] = append(p.imported[at.file], name)
	}
	return nil
}

// chain is a list of files from a to b, each importing the next, or nil
// when a does not lead to b.
func (p *parser) chain(a, b string, seen map[string]bool) []string {
	if a == b {
		return []string{a}
	}
	if seen[a] {
		return nil
	}
	seen[a] = true
	for _, next := range p.imported[a] {
		if rest := p.chain(next, b, seen); rest != nil {
			return append([]string{a}, rest...)
		}
	}
	return nil
}

// readImport reads and splits the file name.
func (p *parser) readImport(at token, pattern, name string) ([]token, error) {
	src, err := p.readFile(name)
	if err != nil {
		return nil, errAt(at, "import %s: %v", pattern, err)
	}
	toks, err := lex(name, src)
	if err != nil {
		return nil, err
	}
	if p.opts.Getenv != nil {
		if err := expandEnv(toks, p.opts.Getenv); err != nil {
			return nil, err
		}
	}
	if !slices.Contains(p.sources, name) {
		p.sources = append(p.sources, name)
	}
	return toks, nil
}

// readFile reads the regular file name from Options.Files, within what
// is left of maxImportBytes.
func (p *parser) readFile(name string) ([]byte, error) {
	f, err := p.opts.Files.Open(fsName(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, pathless(err))
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, pathless(err))
	case info.IsDir():
		return nil, fmt.Errorf("%s is a directory", name)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	src, err := io.ReadAll(io.LimitReader(f, int64(p.budget)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, pathless(err))
	}
	if len(src) > p.budget {
		return nil, fmt.Errorf("the imported files hold more than %d bytes in all", maxImportBytes)
	}
	p.budget -= len(src)
	return src, nil
}

// fsName is a slash-separated path as Options.Files names it: from its
// root, without the leading slash.
func fsName(name string) string {
	if n := strings.TrimPrefix(name, "/"); n != "" {
		return n
	}
	return "."
}

// pathless drops the fs path an error repeats: messages give the name
// the import resolved to instead.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// escapeGlob quotes the characters a glob pattern reads as special.
func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(s)
}
