package corefile

import (
	"fmt"
	"strings"
)

// expandEnv replaces {$NAME} and {%NAME%} in every token.
func expandEnv(toks []token, getenv func(string) (string, bool)) error {
	for i := range toks {
		t := &toks[i]
		out, err := expand(t.text, getenv)
		if err != nil {
			return errAt(*t, "%v", err)
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
