package kubenode

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The node's names on the host are fixed, so that a run can find and
// remove what a killed run left behind; a lock keeps two runs from using
// them at once.
const (
	// dataDir holds logs, etcd, containerd's images and kubelet's pods;
	// stateDir containerd's sockets and state, the runc state and the
	// pods' network namespaces.
	stateDir = "/run/shardns-kubenode"
	lockPath = "/run/shardns-kubenode.lock"
	// bridge is the pods' bridge; the host is its gateway.
	bridge = "shardnsnode0"
	// ruleComment marks the iptables rules the node adds.
	ruleComment = "shardns-kubenode"
	// Ports below the kernel's ephemeral range, so no client socket of
	// another process takes them between a check and the bind.
	etcdPort       = 12379
	etcdPeerPort   = 12380
	apiserverPort  = 16443
	kubeletPort    = 10350
	proxyHealthz   = 10356
	proxyMetrics   = 10349
	nodeName       = "kubenode"
	clusterDomain  = "cluster.local"
	serviceCIDR    = "10.96.0.0/12" // kubeadm's
	podCIDR        = "10.244.0.0/24"
	hostIP         = "10.244.0.1" // the bridge's address: the node's InternalIP
	apiserverSvcIP = "10.96.0.1"
)

// NodeLocalLink is the interface the init container of
// deploy/components/nodelocal adds to the host to hold the node-local
// cache's link-local address. It outlives the DaemonSet's pods, as
// NodeLocal DNSCache's does, so the node's cleanup removes it.
const NodeLocalLink = "shardns0"

// PrepareNodeLocalLink readies NodeLocalLink on a host whose kernel has
// no dummy interface driver (minimal virtual machine kernels): it
// creates the interface as an empty bridge, which holds a local address
// as a dummy interface does, and the init container, which keeps an
// existing interface, adds the address and sets it up. Where the driver
// exists it leaves the host as it is, and the init container creates the
// dummy interface itself. It reports whether it made the bridge.
func (n *Node) PrepareNodeLocalLink(t testing.TB) bool {
	t.Helper()
	if _, err := net.InterfaceByName(NodeLocalLink); err == nil {
		return false
	}
	if _, err := run("ip", "link", "add", NodeLocalLink, "type", "dummy"); err == nil {
		if _, err := run("ip", "link", "del", NodeLocalLink); err != nil {
			t.Fatal("kubenode:", err)
		}
		return false
	}
	if _, err := run("ip", "link", "add", NodeLocalLink, "type", "bridge"); err != nil {
		t.Fatal("kubenode:", err)
	}
	return true
}

// ClusterDNS is the address kubelet gives pods as their nameserver
// (--cluster-dns), kubeadm's default: the tenth address of the Service
// range.
const ClusterDNS = "10.96.0.10"

func dataDir() string { return filepath.Join(os.TempDir(), "shardns-kubenode") }

// kubeletTunables are the sysctls kubelet sets when it starts
// (protectKernelDefaults: false); they are put back when the node stops.
var kubeletTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostProblem says why this host cannot run a kubelet, or "" if it can.
func hostProblem() string {
	if os.Geteuid() != 0 {
		return "kubelet, containerd and kube-proxy need root (mounts, network namespaces, iptables)"
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return "no cgroup file system at /sys/fs/cgroup"
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return "no docker command to build the images with"
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Sprintf("no Docker engine runs to build the images with (%v: %s)", err, bytes.TrimSpace(out))
	}
	for _, cidr := range []string{podCIDR, serviceCIDR} {
		if dev, ok := routedOnHost(netip.MustParsePrefix(cidr)); ok {
			return fmt.Sprintf("%s, which the node uses, is already routed to %s on this host", cidr, dev)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "started")); err != nil {
		// No run of ours left them: chains of kube-proxy or kubelet mean
		// this host is a Kubernetes node, whose rules the cleanup would
		// remove.
		if chains := kubeChains(); len(chains) > 0 {
			return fmt.Sprintf("this host already is a Kubernetes node (iptables chains %s exist)", strings.Join(chains, ", "))
		}
	}
	return ""
}

// iptablesTables are the tables kube-proxy and kubelet add chains to.
var iptablesTables = []string{"filter", "nat", "mangle"}

// kubeChains lists the KUBE-* chains of the host's iptables, table/chain.
func kubeChains() []string {
	var chains []string
	for _, table := range iptablesTables {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(out), "\n") {
			if c, ok := strings.CutPrefix(l, "-N KUBE-"); ok {
				chains = append(chains, table+"/KUBE-"+c)
			}
		}
	}
	return chains
}

// missingTools lists the commands the node needs that are not installed.
func missingTools() []string {
	var missing []string
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "etcd", "iptables", "ip", "conntrack", "ldd"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	for _, f := range []string{cniBinDir + "/bridge", cniBinDir + "/host-local", cniBinDir + "/loopback", busyboxPath} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	return missing
}

// routedOnHost reports whether a route of the host's main table, other
// than the default route and the node's bridge, overlaps p.
func routedOnHost(p netip.Prefix) (string, bool) {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return "", false
	}
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 8 || f[0] == bridge {
			continue
		}
		dst, err1 := hexIPv4(f[1])
		mask, err2 := hexIPv4(f[7])
		if err1 != nil || err2 != nil {
			continue
		}
		ones, _ := net.IPMask(mask.AsSlice()).Size()
		if ones == 0 {
			continue // the default route
		}
		if netip.PrefixFrom(dst, ones).Overlaps(p) {
			return f[0], true
		}
	}
	return "", false
}

// hexIPv4 parses an address of /proc/net/route (little-endian hex).
func hexIPv4(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return netip.Addr{}, fmt.Errorf("bad address %q", s)
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(b))
	return netip.AddrFrom4(a), nil
}

// lockHost takes the host-wide lock of the node tier, waiting up to
// timeout for another run (of another checkout) to finish, and returns its
// release. The kernel releases it when the process dies.
func lockHost(timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("kubenode: another node tier holds %s (waited %v): %w", lockPath, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// setupNetwork creates the pods' bridge, with the host as its gateway,
// and accepts the pods' traffic in FORWARD: Docker sets that chain's
// policy to DROP, and with br_netfilter bridged packets pass it.
func setupNetwork() error {
	if _, err := run("ip", "link", "add", bridge, "type", "bridge"); err != nil {
		return err
	}
	if _, err := run("ip", "addr", "add", hostIP+"/24", "dev", bridge); err != nil {
		return err
	}
	if _, err := run("ip", "link", "set", bridge, "up"); err != nil {
		return err
	}
	for _, ipt := range iptablesCommands() {
		for _, dir := range []string{"-s", "-d"} {
			if _, err := run(ipt, "-w", "-I", "FORWARD", dir, podCIDR, "-m", "comment", "--comment", ruleComment, "-j", "ACCEPT"); err != nil {
				return err
			}
		}
	}
	return nil
}

// iptablesCommands are the iptables back ends in use on this host: the
// default one, and the legacy one if its filter table is loaded (Docker
// may use it, and a packet passes both). A legacy table is not created
// where none is.
func iptablesCommands() []string {
	cmds := []string{"iptables"}
	if _, err := exec.LookPath("iptables-legacy"); err != nil {
		return cmds
	}
	if names, err := os.ReadFile("/proc/net/ip_tables_names"); err == nil && slices.Contains(strings.Fields(string(names)), "filter") {
		cmds = append(cmds, "iptables-legacy")
	}
	return cmds
}

// saveTunables records the sysctls kubelet changes, once: a record left
// by a killed run holds the values from before it.
func saveTunables() error {
	path := filepath.Join(stateDir, "sysctl")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	var b strings.Builder
	for _, k := range kubeletTunables {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %s\n", k, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// portsInUse lists the node's fixed ports that something listens on.
func portsInUse() []string {
	var used []string
	for _, p := range []int{etcdPort, etcdPeerPort, apiserverPort, kubeletPort, proxyHealthz, proxyMetrics} {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			used = append(used, strconv.Itoa(p))
			continue
		}
		l.Close()
	}
	return used
}
