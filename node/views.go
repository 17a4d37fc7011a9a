package node

import (
	"fmt"

	"github.com/shardns/shardns/expression"
	"github.com/shardns/shardns/metrics"
)

// viewPlane is the resolver plane of one view of the configuration.
type viewPlane struct {
	name       string
	conditions []*expression.Condition
	// plane holds the view's rewrite rules, templates, hosts, access
	// lists and upstreams; everything else is the core's.
	plane *core
}

// buildViews compiles each view's expressions and builds its plane, with
// forwarders and caches of its own: a view's answers must not come from
// another's cache. An error names the view's key.
func (c *core) buildViews(listen []string, m *metrics.Forward) error {
	for i, v := range c.cfg.Views {
		key := fmt.Sprintf("views[%d]", i)
		vp := viewPlane{name: v.Name}
		for j, e := range v.Expr {
			cond, err := expression.Compile(e)
			if err != nil {
				return fmt.Errorf("%s.expr[%d]: %w", key, j, err)
			}
			vp.conditions = append(vp.conditions, cond)
		}
		var err error
		if vp.plane, err = c.newPlane(key, c.cfg.Resolved(v), c.log.With("view", v.Name), c.answer, listen, m); err != nil {
			return err
		}
		c.views = append(c.views, vp)
	}
	return nil
}
