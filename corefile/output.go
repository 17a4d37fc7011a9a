package corefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/config"
)

// YAML renders the configuration: a comment header naming the Corefile
// and listing the findings, then only the keys whose values differ from
// config.Default(), the top-level keys in the order of the documentation
// (config.Config's fields) and the keys below them in alphabetical order.
// The result is checked with config.Parse.
func (r *Result) YAML() ([]byte, error) {
	got, err := jsonMap(r.Config)
	if err != nil {
		return nil, err
	}
	def, err := jsonMap(config.Default())
	if err != nil {
		return nil, err
	}
	changed := diff(got, def)
	var out bytes.Buffer
	r.header(&out)
	for _, key := range topLevelKeys() {
		v, ok := changed[key]
		if !ok {
			continue
		}
		y, err := yaml.Marshal(map[string]any{key: v})
		if err != nil {
			return nil, err
		}
		out.Write(y)
	}
	if _, err := config.Parse(out.Bytes()); err != nil {
		return nil, fmt.Errorf("the converted configuration does not validate: %w", err)
	}
	return out.Bytes(), nil
}

func (r *Result) header(out *bytes.Buffer) {
	fmt.Fprintf(out, "# shardns configuration converted from %s by `shardns convert`.\n", r.File)
	fmt.Fprintf(out, "# Keys left out take their defaults (docs/configuration.md).\n")
	for _, unmapped := range []bool{true, false} {
		title := "# Not converted (no shardns equivalent):\n"
		if !unmapped {
			title = "# Notes:\n"
		}
		for _, f := range r.Findings {
			if f.Unmapped == unmapped {
				out.WriteString(title)
				title = ""
				fmt.Fprintf(out, "#   %s: %s\n", f.where(r.File), f.Msg)
			}
		}
	}
}

// topLevelKeys are config.Config's JSON keys in declaration order.
func topLevelKeys() []string {
	t := reflect.TypeFor[config.Config]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}

// jsonMap is v as the generic map its JSON decodes to.
func jsonMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// diff keeps the keys of got whose values differ from def's, descending
// into objects; lists are kept whole, without their zero fields.
func diff(got, def map[string]any) map[string]any {
	out := map[string]any{}
	for k, g := range got {
		d := def[k]
		gm, gok := g.(map[string]any)
		dm, dok := d.(map[string]any)
		if gok && dok {
			if sub := diff(gm, dm); len(sub) > 0 {
				out[k] = sub
			}
			continue
		}
		if !isEmpty(g) || !isEmpty(d) {
			if !reflect.DeepEqual(g, d) {
				out[k] = prune(g)
			}
		}
	}
	return out
}

// isEmpty is true for null and an empty list, which decode the same.
func isEmpty(v any) bool {
	l, ok := v.([]any)
	return v == nil || (ok && len(l) == 0)
}

// prune drops the zero fields of the objects in lists (a listener's
// empty path, a stub's empty policy): they mean "the default" there.
func prune(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pruneObject(e)
		}
		return out
	}
	return v
}

func pruneObject(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, e := range m {
		if k == "chain" {
			if ch, ok := e.(map[string]any); ok {
				out[k] = chainDiff(ch)
				continue
			}
		}
		e = pruneObject(e)
		switch x := e.(type) {
		case nil:
			continue
		case string:
			if x == "" {
				continue
			}
		case bool:
			if !x {
				continue
			}
		case float64:
			if x == 0 {
				continue
			}
		case []any:
			if len(x) == 0 {
				continue
			}
		case map[string]any:
			if len(x) == 0 {
				continue
			}
		}
		out[k] = e
	}
	return out
}

// chainDiff renders a server's chain: each of its keys stays, since a
// chain's key takes the top level's place (an empty list or a false
// flag says the block has none), with the sections reduced to what
// differs from their defaults.
func chainDiff(ch map[string]any) map[string]any {
	def, err := jsonMap(config.Default())
	if err != nil {
		return ch
	}
	out := map[string]any{}
	for k, v := range ch {
		if v == nil {
			continue
		}
		gm, gok := v.(map[string]any)
		dm, dok := def[k].(map[string]any)
		if gok && dok {
			out[k] = diff(gm, dm)
			continue
		}
		out[k] = v
	}
	return out
}
