package functional

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// monitoringDeadline bounds how long the queries may take to all return
// data once the cluster has done everything they show.
const monitoringDeadline = 40 * time.Second

// A real Prometheus scrapes three keyed replicas (rf 1) and a node-local
// process every second while they answer cluster names held here and
// elsewhere, forward to an upstream that answers (and SERVFAILs one
// domain) and to one that does not, turn away a connection without the
// key, tell each other of created Services, and see a replica killed.
// Then every query of the dashboard, with its variables as Grafana
// sends them, must parse and return a number (not only NaN: a quantile
// or ratio of nothing), and every selector read by a rule must select
// series: an alert's expression is healthy, so it returns nothing by
// design; what it reads must exist, or the alert could never fire. The
// same Prometheus evaluates the rules file: every rule must evaluate
// without error.
func TestMonitoringQueriesHaveData(t *testing.T) {
	cp := kubeapi.Shared(t)
	// Twelve namespaces, so that with replicationFactor 1 each replica
	// surely owns zones, and the one killed hands some to the others;
	// three of them are asked about and changed.
	harness.WebNamespaces(t, cp, "mon", 12)
	namespaces := []string{"mon0", "mon1", "mon2"}
	upstream := startMonitoringUpstream(t)
	dead := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	key := harness.NodeLocalCredential(t)
	prom := startPrometheus(t)

	var rs []*harness.Replica
	for i := range 3 {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		rs = append(rs, startMonitoredReplica(t, cp, fmt.Sprintf("m%d", i), seeds, key.KeyFile, upstream, dead))
		prom.target("shardns-peers", rs[i].HTTP)
	}
	harness.Settled(t, rs, len(rs))
	nl := startMonitoredNodeLocal(t, harness.RemoteOf(t, rs[0]), key.CredFile, upstream)
	prom.target("shardns-nodelocal", nl.HTTP)
	harness.Settled(t, append(append([]*harness.Replica{}, rs...), nl), len(rs))
	prom.waitScraped(t, len(rs)+1)

	servers := []string{nl.Addr}
	for _, r := range rs {
		servers = append(servers, r.Addr)
	}
	traffic := startMonitoringTraffic(servers, namespaces, harness.RemoteOf(t, rs[0]))
	defer traffic.stop()

	// Two rounds of created Services, each asked about first everywhere,
	// so that every tier's programming histogram has grown between scrapes.
	for round := range 2 {
		name := fmt.Sprintf("late%d", round)
		for _, ns := range namespaces {
			for _, s := range servers {
				testutil.Exchange(s, "udp", name+"."+ns+".svc.cluster.local.", dns.TypeA)
			}
		}
		for _, ns := range namespaces {
			harness.CreateService(t, cp.Client, harness.ClusterIPService(ns, name))
		}
		prom.waitFor(t, "every tier's programming duration",
			`count(count by (tier) (shardns_dns_programming_duration_seconds_count{tier=~"owner|replica|nodelocal"}) > 0) == 3`)
	}

	// A replica is killed: the others find it down, gain its zones and
	// load them from their sources (the gain load panel), while the
	// node-local process's questions to it fail.
	rs[2].Cmd.Process.Signal(syscall.SIGKILL)

	checks := monitoringChecks(t)
	missing := map[string]string{}
	deadline := time.Now().Add(monitoringDeadline)
	for {
		clear(missing)
		for _, c := range checks {
			if why := c.run(prom); why != "" {
				missing[c.what] = why
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // one scrape interval: Prometheus's data changes no faster
	}
	whats := make([]string, 0, len(missing))
	for what := range missing {
		whats = append(whats, what)
	}
	sort.Strings(whats)
	for _, what := range whats {
		t.Errorf("%s: %s", what, missing[what])
	}
	t.Logf("%d queries of the dashboard and selectors of the rules checked against %d processes", len(checks), len(servers))
	prom.checkRulesEvaluate(t)
}

// monitoringCheck is one query and what it must return.
type monitoringCheck struct {
	what, query string
	number      bool // at least one sample that is a number, not NaN
	parseOnly   bool // only an error fails it
}

// run returns why the check fails, or "".
func (c monitoringCheck) run(p *promServer) string {
	samples, err := p.query(c.query)
	switch {
	case err != nil:
		return fmt.Sprintf("%s: %v", c.query, err)
	case c.parseOnly:
	case len(samples) == 0:
		return fmt.Sprintf("%s returns no data", c.query)
	case c.number && !slicesAny(samples, func(v float64) bool { return !math.IsNaN(v) }):
		return fmt.Sprintf("%s returns only NaN", c.query)
	}
	return ""
}

func slicesAny(vs []float64, f func(float64) bool) bool {
	for _, v := range vs {
		if f(v) {
			return true
		}
	}
	return false
}

// monitoringChecks are the dashboard's queries whole, and for each rule
// the whole expression (it must parse; a healthy cluster's alert returns
// nothing, so its result is not asked for) and each series selector it
// reads, which must select data.
func monitoringChecks(t *testing.T) []monitoringCheck {
	t.Helper()
	var out []monitoringCheck
	for _, q := range readDashboard(t).queries() {
		out = append(out, monitoringCheck{what: "panel " + q.panel, query: q.expr, number: true})
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				out = append(out, monitoringCheck{what: "recording rule " + r.Record, query: r.Expr, number: true})
				continue
			}
			out = append(out, monitoringCheck{what: name + " (evaluates)", query: r.Expr, parseOnly: true})
			sels, err := selectorsOf(r.Expr)
			if err != nil || len(sels) == 0 {
				t.Fatalf("%s: no selectors in %q: %v", name, r.Expr, err)
			}
			for _, s := range sels {
				out = append(out, monitoringCheck{what: name + " reads " + s, query: s})
			}
		}
	}
	return out
}

// startMonitoredReplica starts a keyed replica (rf 1) reading the test
// apiserver that forwards, round robin, to upstream and to dead, where
// nothing listens, with a heap limit for the memory panel. Its watches
// take every object: with sharded watches a ring change's gained zones
// are unknown until their list comes, and shardns_cluster_handoffs_total
// counts none of them (the Handoffs panel stays empty; Gain load time
// and Zones in grace show the handoffs then).
func startMonitoredReplica(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string, keyFile, upstream, dead string) *harness.Replica {
	t.Helper()
	return harness.LaunchReplica(t, name, seeds, func(join, gossip string, remote int) (*harness.Process, error) {
		return harness.TryStart(t, harness.Options{Config: fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: true, kubeconfig: %q, shardedWatch: false}
forward: {upstreams: [%q, %q], policy: round_robin}
memory: {limit: 256Mi}
cluster:
  nodeName: %s
  %s
  bind: %q
  remote: "127.0.0.1:%d"
  replicationFactor: 1
  gossip: fast
  handoffGrace: 2s
  secretKeyFile: %s
`, cp.Kubeconfig, upstream, dead, name, join, gossip, remote, keyFile)})

	})
}

// startMonitoredNodeLocal starts a node-local process with the
// credential, reading the ring from seedRemote and forwarding to upstream.
func startMonitoredNodeLocal(t *testing.T, seedRemote, credFile, upstream string) *harness.Replica {
	t.Helper()
	p := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
forward: {upstreams: [%q]}
cluster:
  nodeName: nl
  replicas: [%q]
  remote: "127.0.0.1:%d"
  gossip: fast
  credentialFile: %s
`, upstream, seedRemote, harness.FreePort(t), credFile)})

	return &harness.Replica{Process: p, HTTP: p.HTTPAddr(t)}
}

// startMonitoringUpstream serves, on loopback UDP, an A record for every
// name but those under fail.example., which are SERVFAIL.
func startMonitoringUpstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := q.Question[0].Name
		switch {
		case dns.IsSubDomain("fail.example.", name):
			m.Rcode = dns.RcodeServerFailure
		case q.Question[0].Qtype == dns.TypeA:
			rr, _ := dns.NewRR(name + " 30 IN A 192.0.2.1")
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// monitoringTraffic asks every server, every 100 ms until stopped, the
// web Services (held here or elsewhere, cached after the first time), a
// name never asked before in each namespace (a miss every time), a
// forwarded name, a new forwarded name and a SERVFAIL one; and opens a
// connection to a replica's remote port that shows no certificate.
type monitoringTraffic struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func startMonitoringTraffic(servers, namespaces []string, remote string) *monitoringTraffic {
	tr := &monitoringTraffic{done: make(chan struct{})}
	tr.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			for _, s := range servers {
				for _, ns := range namespaces {
					testutil.Exchange(s, "udp", "web."+ns+".svc.cluster.local.", dns.TypeA)
					testutil.Exchange(s, "udp", fmt.Sprintf("miss%d.%s.svc.cluster.local.", n, ns), dns.TypeA)
				}
				testutil.Exchange(s, "udp", "cached.example.", dns.TypeA)
				testutil.Exchange(s, "udp", fmt.Sprintf("new%d.example.", n), dns.TypeA)
				testutil.Exchange(s, "udp", "x.fail.example.", dns.TypeA)
			}
			if c, err := net.DialTimeout("tcp", remote, time.Second); err == nil {
				c.Write([]byte("no certificate here\r\n\r\n"))
				c.Close()
			}
			select {
			case <-tr.done:
				return
			case <-tick.C:
			}
		}
	})
	return tr
}

func (tr *monitoringTraffic) stop() {
	close(tr.done)
	tr.wg.Wait()
}

// promServer is a prometheus process on loopback, scraping every second
// the targets written to its file service discovery, and evaluating the
// rules file every second.
type promServer struct {
	addr, dir string
	mu        sync.Mutex
	targets   map[string][]string // job → host:port
}

func startPrometheus(t *testing.T) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (scripts/deps.sh installs it): %v", err)
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	p := &promServer{addr: fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), dir: t.TempDir(), targets: map[string][]string{}}
	var jobs strings.Builder
	for _, job := range []string{"shardns-peers", "shardns-nodelocal"} {
		p.writeTargets(job)
		fmt.Fprintf(&jobs, "  - job_name: %s\n    file_sd_configs: [{files: [%q], refresh_interval: 1s}]\n",
			job, filepath.Join(p.dir, job+".json"))
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}\nrule_files: [%q]\nscrape_configs:\n%s",
		rules, jobs.String())
	config := harness.WriteIn(t, p.dir, "prometheus.yml", []byte(cfg))
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(p.dir, "data"),
		"--web.listen-address="+p.addr, "--log.level=warn")
	var log testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready = %d; log:\n%s", resp.StatusCode, log.String())
		}
		return nil
	})
	return p
}

// target adds addr to job's targets.
func (p *promServer) target(job, addr string) {
	p.mu.Lock()
	p.targets[job] = append(p.targets[job], addr)
	p.mu.Unlock()
	p.writeTargets(job)
}

// writeTargets writes job's file of targets whole, by rename, as file
// service discovery wants; a write that fails shows as targets never
// scraped.
func (p *promServer) writeTargets(job string) {
	p.mu.Lock()
	b, _ := json.Marshal([]map[string]any{{"targets": append([]string{}, p.targets[job]...)}})
	p.mu.Unlock()
	path := filepath.Join(p.dir, job+".json")
	if os.WriteFile(path+".tmp", b, 0o644) == nil {
		os.Rename(path+".tmp", path)
	}
}

// waitScraped waits until n targets have been scraped up.
func (p *promServer) waitScraped(t *testing.T, n int) {
	t.Helper()
	p.waitFor(t, fmt.Sprintf("%d targets up", n), fmt.Sprintf(`count(up == 1) == %d`, n))
}

// waitFor waits until query returns data.
func (p *promServer) waitFor(t *testing.T, what, query string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		samples, err := p.query(query)
		if err != nil {
			return err
		}
		if len(samples) == 0 {
			return fmt.Errorf("waiting for %s: %s returns nothing yet", what, query)
		}
		return nil
	})
}

// query runs an instant query and returns its samples' values; a query
// that does not parse or evaluate is an error.
func (p *promServer) query(q string) ([]float64, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	var values [][2]any
	switch r.Data.ResultType {
	case "vector":
		var v []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, err
		}
		for _, s := range v {
			values = append(values, s.Value)
		}
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(r.Data.Result, &s); err != nil {
			return nil, err
		}
		values = append(values, s)
	default:
		return nil, fmt.Errorf("a %s, not an instant vector", r.Data.ResultType)
	}
	out := make([]float64, len(values))
	for i, v := range values {
		text, _ := v[1].(string)
		fmt.Sscan(text, &out[i])
		if text == "NaN" {
			out[i] = math.NaN()
		}
	}
	return out, nil
}

// checkRulesEvaluate wants every rule of the rules file loaded and
// evaluated by Prometheus without an error.
func (p *promServer) checkRulesEvaluate(t *testing.T) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Health, LastError string
				}
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("Prometheus evaluates rule %s: health %q, %s", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if n == 0 {
		t.Error("Prometheus loaded no rule from the rules file")
	}
}
