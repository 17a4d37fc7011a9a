package functional

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The hostile harness runs an attack as a pod would: from a process of
// its own that only dials the real binary, while a client keeps asking,
// and reads what the attack cost the replica (its RSS) and the client
// (answers lost). Each kind of attack is a function registered in
// hostileAttack; the tests of each port live beside the port's other
// tests (gossip_attack_test.go, http_attack_test.go, ...).

// hostileTarget is one keyed replica serving the demo cluster, its gossip
// and remote ports on loopback.
type hostileTarget struct {
	p              *harness.Process
	gossip, remote string // host:port
	http           string // host:port of its HTTP API
	keyFile        string // the replicas' gossip key
	credentialFile string // the node-local credential derived from it
	dir            string // the folder its configuration and files are in
}

// hostileQuestion is what the harness's client asks throughout an
// attack, and the answer it must get.
const (
	hostileQuestion = "frontend.shop.svc.cluster.local."
	hostileAnswer   = "10.96.10.10"
)

// startHostileTarget starts a replica serving the demo cluster with a
// generated gossip key, gossip and remote on loopback ports of their own,
// no upstream, and extra appended to its configuration as top-level YAML
// (a forward section there replaces the one without upstreams).
func startHostileTarget(t *testing.T, extra string) *hostileTarget {
	t.Helper()
	dir := t.TempDir()
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	harness.WriteIn(t, dir, "demo-cluster.yaml", demo)
	key := make([]byte, 32)
	rand.Read(key)
	h := &hostileTarget{dir: dir, keyFile: harness.WriteIn(t, dir, "gossip.key", []byte(base64.StdEncoding.EncodeToString(key)+"\n"))}
	cred, err := exec.Command(harness.Bin, "credential", "--secret-key-file", h.keyFile).Output()
	if err != nil {
		t.Fatalf("shardns credential: %v", err)
	}
	h.credentialFile = harness.WriteIn(t, dir, "nodelocal.credential", cred)
	forward := "forward: {upstreams: []}\n"
	if strings.Contains(extra, "\nforward:") || strings.HasPrefix(extra, "forward:") {
		forward = "" // extra has its own
	}
	for attempt := 0; ; attempt++ {
		h.gossip = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
		h.remote = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
		cfg := fmt.Sprintf(`dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
%scluster:
  enabled: true
  nodeName: target
  bind: %q
  remote: %q
  replicationFactor: 1
  secretKeyFile: %s
%s`, forward, h.gossip, h.remote, h.keyFile, extra)
		path := harness.WriteIn(t, dir, "shardns.yaml", []byte(cfg))
		p, err := harness.TryStart(t, harness.Options{Args: []string{"--config", path}})
		if err == harness.ErrPortTaken && attempt < 3 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		h.p = p
		break
	}
	h.p.WaitReady(t)
	h.http = h.p.HTTPAddr(t)
	if err := harness.AnswerIs(h.p.Addr, hostileQuestion, hostileAnswer); err != nil {
		t.Fatal(err)
	}
	return h
}

// hostileSpec is one attack, as the attacker process receives it.
type hostileSpec struct {
	Kind    string            // an attack hostileAttack knows
	Target  string            // the address it dials
	Conns   int               // connections to open
	Streams int               // streams (HTTP/2, gRPC) on each connection
	Size    int               // the bytes a message claims
	Files   map[string]string // further inputs by name: a credential, a key, a CA
}

// hostileAttackFunc opens what s says against s.Target, calls ready with
// how many connections or streams it holds once they are in place, and
// holds them until ctx ends.
type hostileAttackFunc func(ctx context.Context, s hostileSpec, ready func(opened int64)) error

// hostileAttack is the function of an attack kind, nil for one unknown.
func hostileAttack(kind string) hostileAttackFunc {
	switch kind {
	case "hold-tcp": // connections that send nothing: the harness's own check
		return holdTCP
	case "cache-fill": // cache_attack_test.go
		return cacheFill
	case "http-slow-headers": // http_attack_test.go
		return httpSlowHeaders
	case "gossip-streams": // gossip_attack_test.go
		return gossipStreams
	case "remote-big-headers": // remote_attack_test.go
		return remoteBigHeaders
	case "remote-silent-sender": // remote_attack_test.go
		return remoteSilentSender
	case "doh-slow-bodies": // h2attack_test.go
		return dohSlowBodies
	case "tcp-slow-messages": // listener_attack_test.go
		return tcpSlowMessages
	}
	return nil
}

// hostileReport is what an attack cost.
type hostileReport struct {
	Spec              hostileSpec
	BeforeMiB         float64 // the replica's RSS before the attack
	PeakMiB           float64 // its highest RSS sampled while the attack held
	Opened            int64   // what the attacker said it held
	Asked, Failed     int     // the client's questions during the attack
	Exited            bool    // the replica exited
	FirstFailure      string
	AttackerErrOutput string
}

func (r hostileReport) String() string {
	return fmt.Sprintf("%s x%d (%d streams, %d bytes) against %s: RSS %.1f → %.1f MiB (+%.1f), %d opened, %d of %d questions failed, exited %v",
		r.Spec.Kind, r.Spec.Conns, r.Spec.Streams, r.Spec.Size, r.Spec.Target, r.BeforeMiB, r.PeakMiB,
		r.PeakMiB-r.BeforeMiB, r.Opened, r.Failed, r.Asked, r.Exited)
}

// check fails t when the attack grew the replica's RSS by budgetMiB or
// more, ended it, or cost the client an answer.
func (r hostileReport) check(t *testing.T, budgetMiB float64) {
	t.Helper()
	t.Log(r)
	if r.Exited {
		t.Errorf("the replica exited under %s", r.Spec.Kind)
	}
	if grew := r.PeakMiB - r.BeforeMiB; grew >= budgetMiB {
		t.Errorf("%s grew the replica's RSS by %.1f MiB (budget %.0f)", r.Spec.Kind, grew, budgetMiB)
	}
	if r.Failed > 0 {
		t.Errorf("%s: %d of %d questions failed, first: %s", r.Spec.Kind, r.Failed, r.Asked, r.FirstFailure)
	}
	if r.Opened == 0 {
		t.Errorf("%s opened nothing: the attack did not take place\n%s", r.Spec.Kind, r.AttackerErrOutput)
	}
}

var hostileReady = regexp.MustCompile(`(?m)^hostile opened (\d+)$`)

// runHostile runs s in an attacker process against h while a client asks
// h a question every 0.25 s (asking once more when it gets no right
// answer, as stub resolvers do); once the attacker holds what it opened, it
// samples h's RSS for hold, then stops the attacker.
func runHostile(t *testing.T, h *hostileTarget, s hostileSpec, hold time.Duration) hostileReport {
	t.Helper()
	if hostileAttack(s.Kind) == nil {
		t.Fatalf("no attack kind %q", s.Kind)
	}
	spec, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	pid := h.p.Cmd.Process.Pid
	r := hostileReport{Spec: s}
	r.BeforeMiB, _ = harness.ResidentMB(t, pid)

	client := probeEvery(func() error { return harness.AnswerIs(h.p.Addr, hostileQuestion, hostileAnswer) })

	cmd := exec.Command("nice", "-n", "19", os.Args[0], "-test.run", "^TestHostileAttacker$", "-test.v")
	cmd.Env = append(os.Environ(), "SHARDNS_HOSTILE_ATTACK="+string(spec))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut testutil.SyncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	opened := make(chan int64, 1)
	var out testutil.SyncBuffer
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(&out, sc.Text())
			if m := hostileReady.FindStringSubmatch(sc.Text()); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				opened <- n
			}
		}
	}()

	select {
	case r.Opened = <-opened:
	case <-time.After(90 * time.Second):
		t.Errorf("the attacker %s was not in place within 90 s", s.Kind)
	}
	end := time.Now().Add(hold)
	for time.Now().Before(end) {
		select {
		case <-h.p.Done:
			r.Exited = true
		case <-time.After(100 * time.Millisecond):
		}
		if r.Exited {
			break
		}
		if now, _ := harness.ResidentMB(t, pid); now > r.PeakMiB {
			r.PeakMiB = now
		}
	}
	stdin.Close() // the attacker stops when its standard input closes
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	client.stop()
	client.wg.Wait()
	r.Asked, r.Failed = client.asked, client.failed
	if client.first != nil {
		r.FirstFailure = client.first.Error()
	}
	r.AttackerErrOutput = out.String() + errOut.String()
	return r
}

// prober asks through ask every 0.25 s until checked, asking once more
// when an answer is missing, as a stub resolver does.
type prober struct {
	stop          context.CancelFunc
	wg            sync.WaitGroup
	asked, failed int
	first         error
}

func probeEvery(ask func() error) *prober {
	ctx, stop := context.WithCancel(context.Background())
	p := &prober{stop: stop}
	p.wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := ask()
			if err != nil {
				err = ask()
			}
			p.asked++
			if err != nil {
				p.failed++
				if p.first == nil {
					p.first = err
				}
			}
		}
	})
	return p
}

// check stops the prober and fails t when it asked nothing or any
// question went unanswered.
func (p *prober) check(t *testing.T, what string) {
	t.Helper()
	p.stop()
	p.wg.Wait()
	t.Logf("%s client during the attack: %d questions, %d failed", what, p.asked, p.failed)
	if p.asked == 0 || p.failed > 0 {
		t.Errorf("%s client: %d of %d questions failed, first: %v", what, p.failed, p.asked, p.first)
	}
}

// TestHostileAttacker is the attacker process of runHostile: it runs only
// with SHARDNS_HOSTILE_ATTACK set, prints "hostile opened N" once its
// attack is in place, and holds it until its standard input closes.
func TestHostileAttacker(t *testing.T) {
	spec := os.Getenv("SHARDNS_HOSTILE_ATTACK")
	if spec == "" {
		t.Skip("run by runHostile in a process of its own")
	}
	var s hostileSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { io.Copy(io.Discard, os.Stdin); stop() }()
	var once sync.Once
	ready := func(n int64) { once.Do(func() { fmt.Printf("hostile opened %d\n", n) }) }
	if err := hostileAttack(s.Kind)(ctx, s, ready); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
}

// holdTCP opens s.Conns TCP connections to s.Target and sends nothing.
func holdTCP(ctx context.Context, s hostileSpec, ready func(int64)) error {
	conns, err := dialMany(ctx, s.Target, s.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	ready(int64(len(conns)))
	<-ctx.Done()
	return nil
}

// dialMany opens n TCP connections to addr, 32 at a time.
func dialMany(ctx context.Context, addr string, n int) ([]io.Closer, error) {
	var mu sync.Mutex
	var conns []io.Closer
	var firstErr error
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	if len(conns) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return conns, nil
}

// TestHostileHarness checks the harness itself: idle connections to the
// DNS port cost the replica little and no answer, and an attack that
// opens nothing is reported as such.
func TestHostileHarness(t *testing.T) {
	h := startHostileTarget(t, "")
	r := runHostile(t, h, hostileSpec{Kind: "hold-tcp", Target: h.p.Addr, Conns: 100}, 2*time.Second)
	r.check(t, 32)
	if r.Asked == 0 {
		t.Error("the client asked nothing during the attack")
	}
	if !strings.Contains(fmt.Sprint(r), "100 opened") {
		t.Errorf("report %v, want 100 opened", r)
	}
	var m *dns.Msg // the target still answers after the attack
	if m, _ = testutil.Exchange(h.p.Addr, "tcp", hostileQuestion, dns.TypeA); m == nil || len(m.Answer) != 1 {
		t.Errorf("after the attack, over TCP: %v", m)
	}
}
