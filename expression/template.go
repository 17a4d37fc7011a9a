package expression

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm"
)

// Value is a compiled expression of a template's `var` (any value) or
// `expr` (a condition), which sees the request functions, group(), and
// the variables declared before it.
type Value struct {
	src  string
	prog *vm.Program
}

// identifier is what a variable's name must look like.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// words are the expression language's own words, which a variable
// would shadow.
var words = map[string]bool{"true": true, "false": true, "nil": true, "in": true, "not": true, "and": true,
	"or": true, "matches": true, "contains": true, "startsWith": true, "endsWith": true, "let": true, "if": true, "else": true}

// CheckVariable reports whether name may be a template variable.
func CheckVariable(name string) error {
	if !identifier.MatchString(name) {
		return fmt.Errorf("variable %q is not an identifier", name)
	}
	_, function := templateEnv(newEnv(), nil, nil)[name]
	_, isBuiltin := builtin.Index[name]
	if function || isBuiltin || words[name] {
		return fmt.Errorf("variable %q is the name of a function or a word of the expression language", name)
	}
	return nil
}

// Declared are the variables declared so far, by name, each holding a
// value of the type its expression gives, for the expressions after it
// to be checked against.
type Declared map[string]any

// Declare adds the variable name, which v sets.
func (d Declared) Declare(name string, v *Value) {
	if t := v.prog.Node().Type(); t != nil && t.Kind() != reflect.Interface {
		d[name] = reflect.Zero(t).Interface()
		return
	}
	d[name] = new(any) // a value of no one type: checked when it runs
}

// CompileValue compiles src with the variables declared before it;
// condition makes it a condition, which must give a boolean.
func CompileValue(src string, declared Declared, condition bool) (*Value, error) {
	env := templateEnv(newEnv(), nil, nil)
	for name, v := range declared {
		env[name] = v
	}
	opts := []expr.Option{expr.Env(env), expr.DisableBuiltin("type")}
	if condition {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		// The first line says what and where; the rest draws it.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("expression %q: %s", src, msg)
	}
	return &Value{src: src, prog: prog}, nil
}

// String is the expression as written.
func (v *Value) String() string { return v.src }

// Scope is what a template's expressions see for one question: the
// request, the groups of the pattern that matched, and the variables.
type Scope struct {
	env  *env
	vars map[string]any
	all  map[string]any
}

// NewScope starts the scope of one matched question; groups are the
// pattern's submatches (0 the whole match) and names its group names.
func NewScope(r *Request, groups []string, names []string) *Scope {
	e := newEnv()
	e.req = r
	s := &Scope{env: e, vars: map[string]any{}}
	s.all = templateEnv(e, groups, names)
	return s
}

// Set evaluates v and declares its result as the variable name.
func (s *Scope) Set(name string, v *Value) error {
	out, err := expr.Run(v.prog, s.all)
	if err != nil {
		return fmt.Errorf("var %s: %w", name, err)
	}
	s.vars[name], s.all[name] = out, out
	return nil
}

// Holds reports whether the condition v holds; an error is a condition
// that failed while it ran, which fails a template's question in CoreDNS
// (where a condition that is false passes it on).
func (s *Scope) Holds(v *Value) (bool, error) {
	out, err := expr.Run(v.prog, s.all)
	if err != nil {
		return false, fmt.Errorf("expr %s: %w", v.src, err)
	}
	b, ok := out.(bool)
	return ok && b, nil
}

// Vars are the variables set so far, for a template's .Var.
func (s *Scope) Vars() map[string]any { return s.vars }

// templateEnv is the request functions of e as a map, under the names
// of env's expr tags (one list for views and templates), and group(): by
// name or by index, "" when there is no such group.
func templateEnv(e *env, groups, names []string) map[string]any {
	m := map[string]any{
		"group": func(key any) string {
			switch k := key.(type) {
			case int:
				if k >= 0 && k < len(groups) {
					return groups[k]
				}
			case string:
				for i, n := range names {
					if n == k && n != "" && i < len(groups) {
						return groups[i]
					}
				}
			}
			return ""
		},
	}
	v := reflect.ValueOf(e).Elem()
	for _, f := range reflect.VisibleFields(v.Type()) {
		if name := f.Tag.Get("expr"); name != "" {
			m[name] = v.FieldByIndex(f.Index).Interface()
		}
	}
	return m
}
