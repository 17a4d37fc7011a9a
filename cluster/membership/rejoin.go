package membership

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"time"
)

// rejoiner is the state of the rejoin loop. Only one goroutine uses it at
// a time: Start for the first round, then rejoinLoop.
type rejoiner struct {
	m     *Membership
	alone bool          // the last round reached no target and no member
	retry time.Duration // next wait while alone; doubles to RejoinInterval
}

func (m *Membership) newRejoiner() *rejoiner {
	return &rejoiner{m: m, retry: m.cfg.Timing.ProbeInterval}
}

// rejoinLoop runs a round every RejoinInterval (sooner while alone, so
// replicas that start together find each other quickly), and whenever
// RejoinNow is signalled, until ctx ends.
func (m *Membership) rejoinLoop(ctx context.Context, r *rejoiner) {
	defer close(m.rejoinDone)
	t := time.NewTimer(r.next())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.cfg.RejoinNow: // nil unless set: never ready
			// Reset below discards a tick that fired meanwhile (Go 1.23
			// timers), so the round is not run twice.
		}
		r.round(ctx)
		t.Reset(r.next())
	}
}

func (r *rejoiner) next() time.Duration {
	every := r.m.cfg.RejoinInterval
	if !r.alone {
		r.retry = r.m.cfg.Timing.ProbeInterval
		return every
	}
	d := min(r.retry, every)
	r.retry = min(2*r.retry, every)
	return d
}

// round joins every seed address that is not a live member, one at a
// time so that Close (which cancels ctx) interrupts it between seeds.
// Joining a live member again would only repeat memberlist's own
// push/pull, so in a healthy cluster a round sends nothing.
func (r *rejoiner) round(ctx context.Context) {
	log := r.m.cfg.Logger
	targets := r.m.targets(ctx)
	var joined []string
	for _, addr := range targets {
		if ctx.Err() != nil {
			return
		}
		if _, err := r.m.list.Join([]string{addr}); err != nil {
			log.Debug("membership: join failed", "addr", addr, "err", err)
			continue
		}
		joined = append(joined, addr)
	}
	members := r.m.numMembers()
	alone := len(joined) == 0 && members == 1 && len(targets) > 0
	switch {
	case len(joined) > 0:
		log.Info("membership: joined", "seeds", joined, "members", members)
	case alone && !r.alone:
		log.Info("membership: no seed answered; running alone until one does", "seeds", targets)
	}
	r.alone = alone
}

// targets returns the addresses to join: the static and dynamic seeds,
// resolved, and the addresses from which a known name was claimed since
// the last round (a restarted pod, see conflicts); all minus live members.
func (m *Membership) targets(ctx context.Context) []string {
	log := m.cfg.Logger
	seeds := slices.Clone(m.cfg.Seeds)
	if f := m.cfg.SeedsFunc; f != nil {
		fctx, cancel := context.WithTimeout(ctx, m.cfg.Timing.TCPTimeout)
		more, err := f(fctx)
		cancel()
		if err != nil {
			log.Warn("membership: listing seeds failed", "err", err)
		}
		seeds = append(seeds, more...)
	}
	m.mu.Lock()
	conflicts := m.conflicts
	m.conflicts = make(map[string]string)
	m.mu.Unlock()

	skip := m.liveAddrs() // and, as we go, addresses already listed
	var out []string
	add := func(addr string) {
		if !skip[addr] {
			skip[addr] = true
			out = append(out, addr)
		}
	}
	hosts := map[netip.Addr]struct{}{}
	for _, s := range seeds {
		for _, addr := range m.resolve(ctx, s) {
			add(addr)
			if ap, err := netip.ParseAddrPort(addr); err == nil {
				hosts[ap.Addr().Unmap()] = struct{}{}
			}
		}
	}
	m.seedHosts.Store(&hosts) // their streams are read (sourceAdmitted)
	for addr, name := range conflicts {
		log.Info("membership: member claimed from a new address; joining it once the old one is dead",
			"member", name, "addr", addr)
		add(addr)
	}
	return out
}

// resolve turns a seed into ip:port addresses; a host name may yield many
// (a headless Service) or, before its pods are published, none.
func (m *Membership) resolve(ctx context.Context, seed string) []string {
	host, port, err := splitSeed(seed, m.port)
	if err != nil {
		m.cfg.Logger.Warn("membership: ignoring invalid seed", "seed", seed, "err", err)
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return []string{net.JoinHostPort(ip.String(), port)}
	}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.Timing.TCPTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(rctx, host)
	if err != nil {
		m.cfg.Logger.Debug("membership: resolving seed failed", "seed", seed, "err", err)
		return nil
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip.IP.String(), port)
	}
	return out
}
