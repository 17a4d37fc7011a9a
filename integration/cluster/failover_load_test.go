package cluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

// The load of the kill tests (failover_test.go): questions at a steady
// rate without client retries, each answer compared with the one every
// replica gave while all were up.

// loadQuestion is one name a load asks and the answer every replica gave it
// while all of them were up.
type loadQuestion struct {
	name  string
	qtype uint16
	want  string // see canonical
}

// canonical is an answer reduced to what must not change when a replica
// dies: the rcode and the answer records, sorted, without TTLs.
func canonical(r *dns.Msg) string {
	rrs := make([]string, 0, len(r.Answer))
	for _, rr := range r.Answer {
		c := dns.Copy(rr)
		c.Header().Ttl = 0
		rrs = append(rrs, strings.ToLower(c.String()))
	}
	slices.Sort(rrs)
	return dns.RcodeToString[r.Rcode] + " " + strings.Join(rrs, " | ")
}

// Outcomes of one query of a kill load.
const (
	answeredRight = iota
	answeredServfail
	answeredNXDOMAIN // NXDOMAIN for a name that exists
	answeredWrong    // any other answer that differs
	answeredNot      // no answer within the client's timeout
	outcomes
)

// killLoad asks questions of the targets at a steady rate, one client
// attempt each (no retry), and keeps every outcome with the time the
// question was sent.
type killLoad struct {
	start time.Time
	wg    sync.WaitGroup
	stop  atomic.Bool

	mu      sync.Mutex
	sent    []time.Duration // since start, by query
	took    []time.Duration // until its answer, by query
	result  []int
	stale   []bool         // answered with the extended error Stale Answer, by query
	asked   []loadQuestion // by query
	to      []string       // the target asked, by query
	example [outcomes]string
}

// startKillLoad sends rate questions a second, next(i) being the i-th,
// to the targets in turn.
func startKillLoad(targets []string, rate int, next func(i int) loadQuestion) *killLoad {
	l := &killLoad{start: time.Now()}
	const tick = 10 * time.Millisecond
	perTick := max(rate*int(tick)/int(time.Second), 1)
	l.wg.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for i := 0; !l.stop.Load(); {
			<-t.C
			for range perTick {
				q, addr := next(i), targets[i%len(targets)]
				l.mu.Lock()
				idx := len(l.sent)
				l.sent = append(l.sent, time.Since(l.start))
				l.took = append(l.took, 0)
				l.result = append(l.result, -1)
				l.stale = append(l.stale, false)
				l.asked, l.to = append(l.asked, q), append(l.to, addr)
				l.mu.Unlock()
				l.wg.Go(func() { l.ask(idx, addr, q) })
				i++
			}
		}
	})
	return l
}

func (l *killLoad) ask(idx int, addr string, q loadQuestion) {
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	m.SetEdns0(1232, false) // as stub resolvers do: a stale answer says so in its OPT record
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, UDPSize: 65535}
	start := time.Now()
	r, _, err := c.Exchange(m, addr)
	took := time.Since(start)
	res, detail := answeredRight, ""
	switch {
	case err != nil:
		res, detail = answeredNot, err.Error()
	case r.Rcode == dns.RcodeServerFailure:
		res = answeredServfail
	case canonical(r) == q.want:
	case r.Rcode == dns.RcodeNameError:
		res = answeredNXDOMAIN
	default:
		res = answeredWrong
	}
	if res != answeredRight && detail == "" {
		detail = fmt.Sprintf("%s %s from %s: %q, want %q", q.name, dns.TypeToString[q.qtype], addr, canonical(r), q.want)
	}
	l.mu.Lock()
	l.result[idx], l.took[idx] = res, took
	l.stale[idx] = err == nil && staleAnswer(r)
	if l.example[res] == "" {
		l.example[res] = detail
	}
	l.mu.Unlock()
}

// staleAnswer reports whether r carries the extended error Stale Answer
// (RFC 8914): a cached answer past its TTL, given when no owner answered.
func staleAnswer(r *dns.Msg) bool {
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok && e.InfoCode == dns.ExtendedErrorCodeStaleAnswer {
				return true
			}
		}
	}
	return false
}

// finish stops the load and waits for the answers still due.
func (l *killLoad) finish() killReport {
	l.stop.Store(true)
	l.wg.Wait()
	rep := killReport{first: map[int]time.Duration{}, last: map[int]time.Duration{}, example: l.example,
		sent: l.sent, took: l.took, result: l.result, stale: l.stale, asked: l.asked, to: l.to}
	for i, res := range l.result {
		rep.count[res]++
		if _, ok := rep.first[res]; !ok {
			rep.first[res] = l.sent[i]
		}
		rep.last[res] = l.sent[i]
	}
	rep.total = len(l.result)
	return rep
}

// killReport sums a kill load up.
type killReport struct {
	total       int
	count       [outcomes]int
	first, last map[int]time.Duration // send time of the first and last query of each outcome
	example     [outcomes]string
	sent, took  []time.Duration // by query
	result      []int
	stale       []bool         // by query: answered stale (staleAnswer)
	asked       []loadQuestion // by query
	to          []string       // the target asked, by query
}

// latency is the median, 99th percentile and maximum time to an answer
// of the queries sent within span after at that got one.
func (r killReport) latency(at, span time.Duration) (p50, p99, slowest time.Duration) {
	var ds []time.Duration
	for i, s := range r.sent {
		if s >= at && s < at+span && r.result[i] != answeredNot {
			ds = append(ds, r.took[i])
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
}

// window is the time from the first to the last query sent that got one
// of the outcomes, and when the first was sent relative to at.
func (r killReport) window(at time.Duration, outcomes ...int) (from, length time.Duration, ok bool) {
	var first, last time.Duration
	for _, o := range outcomes {
		f, seen := r.first[o]
		if !seen {
			continue
		}
		if !ok || f < first {
			first = f
		}
		last, ok = max(last, r.last[o]), true
	}
	return first - at, last - first, ok
}

// wrong is the number of answers that were neither right nor a failure
// to answer: the ones no replica may ever give.
func (r killReport) wrong() int { return r.count[answeredNXDOMAIN] + r.count[answeredWrong] }

func (r killReport) String() string {
	return fmt.Sprintf("%d queries: %d right, %d SERVFAIL, %d unanswered within 2 s, %d NXDOMAIN for names that exist, %d other wrong answers",
		r.total, r.count[answeredRight], r.count[answeredServfail], r.count[answeredNot], r.count[answeredNXDOMAIN], r.count[answeredWrong])
}

// baseline asks every question of every target and keeps the answer,
// which must be the same on each: the state the load compares against.
func baseline(t *testing.T, targets []string, qs []loadQuestion) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				for _, addr := range targets {
					testutil.Eventually(t, 30*time.Second, func() error {
						r, err := testutil.Exchange(addr, "udp", qs[i].name, qs[i].qtype)
						if err != nil {
							return err
						}
						if r.Rcode == dns.RcodeServerFailure {
							return fmt.Errorf("%s: SERVFAIL", qs[i].name)
						}
						got := canonical(r)
						if qs[i].want == "" {
							qs[i].want = got
						} else if got != qs[i].want {
							t.Errorf("%s %s: %s answers %q, another replica %q", qs[i].name,
								dns.TypeToString[qs[i].qtype], addr, got, qs[i].want)
						}
						return nil
					})
				}
			}
		})
	}
	for i := range qs {
		work <- i
	}
	close(work)
	wg.Wait()
}

// finishedSoFar returns the outcomes of the queries answered so far.
func (l *killLoad) finishedSoFar() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, r := range l.result {
		if r >= 0 {
			out = append(out, r)
		}
	}
	return out
}
