package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config is one node's membership settings. Start from DefaultConfig.
type Config struct {
	// NodeName identifies the node in the cluster and in ownership hashing.
	// Required. It must be unique and stable across restarts (the
	// StatefulSet pod name), so a restarted pod keeps its zones.
	NodeName string
	// Bind is the host:port memberlist listens on, UDP and TCP. The host is
	// an IP address, or empty for every IPv4 interface; port 0 picks a
	// free port (tests).
	Bind string
	// Advertise is the ip:port other members reach this node at. Empty
	// advertises the Bind IP, or a private interface address when Bind is
	// unspecified; port 0 advertises the bound port.
	Advertise string
	// Seeds are host:port addresses joined at start and re-joined every
	// RejoinInterval while they are not live members. A host name is
	// resolved on every attempt (a headless Service name yields every pod);
	// a missing port means this node's own gossip port.
	Seeds []string
	// SeedsFunc, when set, returns more seeds in the same form as Seeds,
	// e.g. the addresses of a headless Service's EndpointSlices. It is
	// called at start and on every rejoin with a deadline of TCPTimeout;
	// an error is logged and the static Seeds are still tried.
	SeedsFunc func(ctx context.Context) ([]string, error)
	// Label is stamped on every gossip packet and stream; nodes with
	// different labels never talk, so two clusters sharing a network or a
	// stale seed list cannot merge. At most 255 bytes.
	Label string
	// SecretKeys, when set, encrypt and authenticate gossip with AES-GCM:
	// the first encrypts, each decrypts (a rotation in progress). Each is
	// 16, 24 or 32 bytes (see ParseSecretKeys); every member needs the
	// first key of every other member.
	SecretKeys [][]byte
	// Admit, when set, decides whether a node may become or stay a member:
	// it is asked about every alive message and every node of a joining
	// member's state, this node excepted; a non-empty reason refuses the
	// node (its alive message is ignored, its join fails). memberlist asks
	// under its node lock: Admit must only read memory.
	Admit func(m Member) (reason string)
	// Rejected, when set, is told of every refused node or gossip message:
	// its address (ip:port), the name it claimed if known, and the reason
	// (Admit's, or "key" and "label" for gossip that fails decryption or
	// carries another label). It must not block.
	Rejected func(addr, name, reason string)
	// AdmitSource, when set, says whether a stream (a push/pull, a join,
	// a TCP ping) from ip may be read, e.g. an endpoint of the peers
	// Service; streams from the hosts of live members and of the seeds
	// (as last resolved) are read whatever it says. memberlist reads a
	// stream whole before the key can refuse it, so a refused address
	// costs nothing. Nil reads streams from every address, within
	// Streams. It must only read memory.
	AdmitSource func(ip netip.Addr) bool
	// Streams bound the streams memberlist reads at once; zero fields
	// take DefaultStreamLimits(Timing.TCPTimeout)'s.
	Streams StreamLimits
	// Serving, when set, is asked whether a member gossip declared dead
	// still serves (its actor remote port completes a handshake): any
	// holder of the key may declare any member dead. While it says so,
	// the member stays in Members, for at most DeadNodeReclaimTime, and
	// its gossip address is joined so that it hears of its death and
	// refutes it; once gossip hears it alive again nothing changed.
	// memberlist does not tell a member that left from one declared dead:
	// Serving must say false for one that said it is leaving. It is asked
	// off memberlist's lock, with a deadline of Timing.ProbeInterval.
	Serving func(ctx context.Context, m Member) bool
	// RejoinNow, when set, asks for a rejoin round at once on every
	// receive: e.g. when the peers Service lists a new address, which Admit
	// refused until then, so that a replica refused while its address was
	// not yet published is taken in without waiting for RejoinInterval.
	RejoinNow <-chan struct{}
	// RejoinInterval is how often seeds that are not live members are
	// joined again. memberlist never re-dials a peer it declared dead, so
	// this is what merges the two sides of a healed partition.
	RejoinInterval time.Duration
	// Meta is this node's metadata as other members see it (Member.Meta),
	// e.g. its actor-remote address and role. At most 512 bytes.
	Meta []byte
	// Timing tunes failure detection and gossip. Zero fields take the value
	// of DefaultTiming; FastTiming suits tests on loopback.
	Timing Timing
	// Logger receives this package's events; memberlist's own log lines are
	// passed to it at debug level. Nil discards.
	Logger *slog.Logger

	// blocked, set only by tests, drops all traffic to the gossip address
	// addr: a network partition without root or iptables.
	blocked func(addr string) bool
}

// Timing tunes memberlist's SWIM failure detector and gossip.
type Timing struct {
	// ProbeInterval is how often this node probes one random member.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for its ack before
	// asking other members to probe indirectly. At most ProbeInterval.
	ProbeTimeout time.Duration
	// SuspicionMult sets how long a member that failed a probe stays
	// suspect before it is declared dead: SuspicionMult × ProbeInterval ×
	// max(1, log10(members)), up to 6× longer until peers confirm it.
	SuspicionMult int
	// GossipInterval is how often queued news (joins, leaves, deaths) is
	// sent to three random members.
	GossipInterval time.Duration
	// PushPullInterval is how often the full member list is exchanged with
	// one random member (anti-entropy). Dead members are still gossiped to
	// for this long, so one that comes back at the same address hears of it.
	PushPullInterval time.Duration
	// TCPTimeout bounds one TCP exchange: a join, a push/pull, a fallback
	// probe.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime is how long a member must have been dead before
	// its name may come back at another address (a pod restarted with a
	// new IP). Until then the new address is rejected as a name conflict.
	DeadNodeReclaimTime time.Duration
}

// DefaultTiming is memberlist's LAN profile, gossiping once a second
// instead of five times: a crashed member of a small cluster is declared
// dead about 5 s after it stops answering.
//
// The gossip ticker fires whether or not news is queued, and wakeups are
// most of what an idle process spends: at 200 ms an idle replica of three
// woke about 65 times a second and spent 2.9 ms of CPU a second, at 1 s
// about 30 times and 1.2 ms (a replica alone: 32 and 8 times). The news
// gossiped here is membership only: joins, announcements, leaves and
// deaths, rare and never on a query's path. It still reaches every
// member of a few dozen within two or three rounds, and rides on the
// probes meanwhile, while the zones a change moves are served by their
// old owners for cluster.handoffGrace (15 s); a member that exits is
// found by its closed remote port, not by gossip.
func DefaultTiming() Timing {
	lan := memberlist.DefaultLANConfig()
	return Timing{
		ProbeInterval:    lan.ProbeInterval,    // 1s
		ProbeTimeout:     lan.ProbeTimeout,     // 500ms
		SuspicionMult:    lan.SuspicionMult,    // 4
		GossipInterval:   time.Second,          // memberlist's: 200ms
		PushPullInterval: lan.PushPullInterval, // 30s
		TCPTimeout:       lan.TCPTimeout,       // 10s
		// The name of a crashed member is free again one suspicion period
		// after it was declared dead: long enough that a falsely accused
		// member's refutation wins, short next to a pod restart.
		DeadNodeReclaimTime: time.Duration(lan.SuspicionMult) * lan.ProbeInterval,
	}
}

// FastTiming detects a crashed member within about a second on loopback.
// It is for tests; on a real network it would report false failures.
func FastTiming() Timing {
	return Timing{
		ProbeInterval:       200 * time.Millisecond,
		ProbeTimeout:        100 * time.Millisecond,
		SuspicionMult:       3,
		GossipInterval:      50 * time.Millisecond,
		PushPullInterval:    2 * time.Second,
		TCPTimeout:          time.Second,
		DeadNodeReclaimTime: 600 * time.Millisecond,
	}
}

// DefaultConfig returns the settings for every field a caller leaves out;
// NodeName must still be set.
func DefaultConfig() Config {
	return Config{
		Bind:           "0.0.0.0:7946",
		RejoinInterval: 10 * time.Second,
		Timing:         DefaultTiming(),
	}
}

// validate fills defaults into zero fields and reports the first invalid
// setting. It copies the slices it keeps, so callers may reuse theirs.
func (c *Config) validate() error {
	def := DefaultConfig()
	if c.NodeName == "" {
		return errors.New("membership: node name is required")
	}
	if c.Bind == "" {
		c.Bind = def.Bind
	}
	if c.RejoinInterval <= 0 {
		c.RejoinInterval = def.RejoinInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := c.Timing.fill(def.Timing); err != nil {
		return err
	}
	c.Streams.fill(DefaultStreamLimits(c.Timing.TCPTimeout))
	if _, _, err := splitBind(c.Bind); err != nil {
		return err
	}
	if _, _, err := splitAdvertise(c.Advertise); err != nil {
		return err
	}
	if ip, _, _ := splitBind(c.Bind); c.Advertise == "" && net.ParseIP(ip).Equal(net.IPv6unspecified) {
		return fmt.Errorf("membership: bind %q listens on every IPv6 address: set advertise", c.Bind)
	}
	for _, s := range c.Seeds {
		if _, _, err := splitSeed(s, "1"); err != nil {
			return fmt.Errorf("membership: seed %q: %w", s, err)
		}
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		return fmt.Errorf("membership: label is %d bytes, at most %d", len(c.Label), memberlist.LabelMaxSize)
	}
	if len(c.Meta) > memberlist.MetaMaxSize {
		return fmt.Errorf("membership: meta is %d bytes, at most %d", len(c.Meta), memberlist.MetaMaxSize)
	}
	for i, k := range c.SecretKeys {
		if err := checkKeyLen(len(k)); err != nil {
			return fmt.Errorf("membership: secret key %d: %w", i+1, err)
		}
	}
	c.Seeds = append([]string(nil), c.Seeds...)
	c.Meta = append([]byte(nil), c.Meta...)
	c.SecretKeys = slices.Clone(c.SecretKeys)
	return nil
}

// fill replaces zero fields with def's and checks the result.
func (t *Timing) fill(def Timing) error {
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setDur(&t.ProbeInterval, def.ProbeInterval)
	setDur(&t.ProbeTimeout, def.ProbeTimeout)
	setDur(&t.GossipInterval, def.GossipInterval)
	setDur(&t.PushPullInterval, def.PushPullInterval)
	setDur(&t.TCPTimeout, def.TCPTimeout)
	setDur(&t.DeadNodeReclaimTime, def.DeadNodeReclaimTime)
	if t.SuspicionMult == 0 {
		t.SuspicionMult = def.SuspicionMult
	}
	switch {
	case t.ProbeInterval < 0 || t.ProbeTimeout < 0 || t.GossipInterval < 0 ||
		t.PushPullInterval < 0 || t.TCPTimeout < 0 || t.DeadNodeReclaimTime < 0 || t.SuspicionMult < 0:
		return errors.New("membership: timing values must not be negative")
	case t.ProbeTimeout > t.ProbeInterval:
		return fmt.Errorf("membership: probe timeout %v exceeds probe interval %v", t.ProbeTimeout, t.ProbeInterval)
	}
	return nil
}

// splitBind parses Bind: an IP (or empty, meaning 0.0.0.0) and a port.
func splitBind(bind string) (ip string, port int, err error) {
	host, p, err := net.SplitHostPort(bind)
	if err != nil {
		return "", 0, fmt.Errorf("membership: bind %q: %w", bind, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("membership: bind %q: host must be an IP address", bind)
	}
	port, err = parsePort(p)
	if err != nil {
		return "", 0, fmt.Errorf("membership: bind %q: %w", bind, err)
	}
	return host, port, nil
}

// splitAdvertise parses Advertise: empty, or an IP and a port (0: bound).
func splitAdvertise(adv string) (ip string, port int, err error) {
	if adv == "" {
		return "", 0, nil
	}
	host, p, err := net.SplitHostPort(adv)
	if err == nil && net.ParseIP(host) == nil {
		err = errors.New("host must be an IP address")
	}
	if err == nil {
		port, err = parsePort(p)
	}
	if err != nil {
		return "", 0, fmt.Errorf("membership: advertise %q: %w", adv, err)
	}
	return host, port, nil
}

// splitSeed parses a seed; a bare host or IP takes defPort.
func splitSeed(seed, defPort string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(seed)
	if err != nil {
		if net.ParseIP(seed) != nil {
			return seed, defPort, nil
		}
		if h, _, err2 := net.SplitHostPort(seed + ":" + defPort); err2 == nil && h != "" {
			return h, defPort, nil
		}
		return "", "", err
	}
	if host == "" {
		return "", "", errors.New("missing host")
	}
	if _, err := parsePort(port); err != nil {
		return "", "", err
	}
	return host, port, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q", p)
	}
	return n, nil
}
