package functional

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"
)

// The monitoring shipped with the chart: the alerting rules and the
// Grafana dashboard under deploy/helm/shardns/files, and their runbooks.
const (
	rulesFile     = "../../deploy/helm/shardns/files/shardns.rules.yaml"
	rulesTestFile = "testdata/shardns.rules.test.yaml"
	dashboardFile = "../../deploy/helm/shardns/files/shardns-dashboard.json"
	alertsDoc     = "../../docs/alerts.md"
)

// rulesDoc is the part of a Prometheus rules file the tests read.
type rulesDoc struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) rulesDoc {
	t.Helper()
	var doc rulesDoc
	readYAML(t, rulesFile, &doc)
	if len(doc.Groups) == 0 {
		t.Fatalf("%s has no groups", rulesFile)
	}
	return doc
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// dashboardDoc is the part of a Grafana dashboard the tests read.
type dashboardDoc struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	Title      string           `json:"title"`
	Type       string           `json:"type"`
	Datasource *json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboardDoc {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardQuery is one target of a panel, its template variables
// replaced by what Grafana sends with every job and instance selected.
type dashboardQuery struct{ panel, expr string }

func (d dashboardDoc) queries() []dashboardQuery {
	var out []dashboardQuery
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, dashboardQuery{p.Title, grafanaVars.Replace(tg.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// grafanaVars are the dashboard's variables as Grafana substitutes them
// with All selected (the variables' allValue) and a 1 s scrape interval.
var grafanaVars = strings.NewReplacer(`$job`, `.+`, `$instance`, `.+`, `$__rate_interval`, `1m`)

// promtool checks the rules file and runs the rule tests: each alert
// fires on the series written for it, not before its time, and a healthy
// cluster fires none. The test file must fire every alert of the rules
// file and hold each in its healthy case; every alert's runbook_url names
// a section of docs/alerts.md; the dashboard is a Grafana dashboard with
// the variables it promises and every query through ${datasource}.
func TestAlertRules(t *testing.T) {
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command("promtool", args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	fired, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	doc, err := os.ReadFile(alertsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fired[r.Alert] {
				t.Errorf("%s: no test in %s fires it", r.Alert, rulesTestFile)
			}
			if !silent[r.Alert] {
				t.Errorf("%s: no test in %s shows it silent", r.Alert, rulesTestFile)
			}
			url := r.Annotations["runbook_url"]
			_, anchor, ok := strings.Cut(url, "docs/alerts.md#")
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q names no section of %s", r.Alert, url, alertsDoc)
			}
		}
	}

	d := readDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("dashboard schemaVersion %d: want a current Grafana's (39)", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["job"] != "query" || vars["instance"] != "query" {
		t.Errorf("dashboard variables %v: want datasource (a Prometheus data source), job and instance", vars)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if !strings.Contains(string(tg.Datasource), "${datasource}") {
				t.Errorf("panel %q asks %s, not ${datasource}", p.Title, tg.Datasource)
			}
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q: %s does not follow the job variable", p.Title, tg.Expr)
			}
		}
	}
	if len(d.queries()) == 0 {
		t.Fatal("the dashboard has no queries")
	}
}

// markdownAnchors are the anchors GitHub gives the headings of a
// Markdown text: lower case, spaces to hyphens, punctuation dropped.
func markdownAnchors(text string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// promqlWord is an identifier or a number (a number's exponent and a
// duration's unit included).
var promqlWord = regexp.MustCompile(`^[a-zA-Z_:0-9.][a-zA-Z0-9_:.]*`)

// promqlKeywords take a label list in parentheses after them, or are
// operators: neither is a series.
var promqlKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "and": true, "or": true, "unless": true, "bool": true,
	"offset": true, "atan2": true}

// aggregationClause follows an aggregation's name when its grouping
// comes first: sum by (job) (...).
var aggregationClause = regexp.MustCompile(`^(by|without)\s*\(`)

// selectorsOf lists the series selectors of a PromQL expression (metric
// name and label matchers, without range or offset), in order: what an
// expression reads, whatever it computes from it. Function and
// aggregation names are followed by "(", keywords by their label list,
// and strings, label lists and ranges are skipped whole.
func selectorsOf(expr string) ([]string, error) {
	var out []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			end := strings.IndexByte(expr[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i += end + 2
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated range at %d", i)
			}
			i += end + 1
		case c == '{':
			return nil, fmt.Errorf("a selector without a metric name at %d", i)
		default:
			w := promqlWord.FindString(expr[i:])
			if w == "" {
				i++
				continue
			}
			i += len(w)
			rest := strings.TrimLeft(expr[i:], " \t\n")
			switch {
			case c >= '0' && c <= '9' || c == '.':
			case promqlKeywords[w]:
				if strings.HasPrefix(rest, "(") { // a label list
					end := strings.IndexByte(rest, ')')
					if end < 0 {
						return nil, fmt.Errorf("unterminated label list after %s", w)
					}
					i = len(expr) - len(rest) + end + 1
				}
			case strings.HasPrefix(rest, "(") || aggregationClause.MatchString(rest): // a function or aggregation
			case strings.HasPrefix(expr[i:], "{"):
				end := closing(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated matchers after %s", w)
				}
				out = append(out, w+expr[i:i+end+1])
				i += end + 1
			default:
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// closing is the index in s of the first end byte outside a quoted
// string, or -1.
func closing(s string, end byte) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0 && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == end:
			return i
		}
	}
	return -1
}

func TestSelectorsOf(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`absent(up{job=~"shardns.*"} == 1)`, []string{`up{job=~"shardns.*"}`}},
		{`histogram_quantile(0.99, sum by (job, le) (rate(a_bucket{job=~"x", le!="0.5"}[5m]))) > 1`, []string{`a_bucket{job=~"x", le!="0.5"}`}},
		{`count(count_values("ring_hash", h{job=~"s.*"})) > 1`, []string{`h{job=~"s.*"}`}},
		{`sum(rate(a{x="}"}[1m]) unless on (job, instance) b) / 1e18`, []string{`a{x="}"}`, `b`}},
		{`time() - ts{job=~"a"} > 60`, []string{`ts{job=~"a"}`}},
		{"1 - (\n  sum by (instance) (rate(d{result=\"ok\"}[5m]))\n/\n  sum without (result) (rate(d[5m] offset 1m))\n) > 0.05",
			[]string{`d{result="ok"}`, `d`}},
	} {
		got, err := selectorsOf(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("selectorsOf(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`a{job="x"`, `rate(a[5m`, `{job="x"}`, `count_values("x, a)`} {
		if _, err := selectorsOf(bad); err == nil {
			t.Errorf("selectorsOf(%q) took it", bad)
		}
	}
}
