package kubenode

import (
	"fmt"
	"path/filepath"
)

const (
	// cniBinDir is where Debian's containernetworking-plugins puts them.
	cniBinDir = "/usr/lib/cni"
	// busyboxPath is Debian's busybox-static.
	busyboxPath = "/bin/busybox"
	// Image names of the node's own images, imported into containerd; the
	// .test domain (ImageDomain) can be pulled from nowhere.
	pauseImage = ImageDomain + "pause:1"
	// BusyboxImage holds busybox (nslookup, wget, sh) and glibc's getent,
	// which resolves as most programs do (search path, ndots).
	BusyboxImage = ImageDomain + "busybox:1"
)

// containerdConfig: the CRI plugin of Debian's containerd 1.6, on its own
// socket, root and state, so it shares nothing with Docker's containerd.
// restrict_oom_score_adj: the kernel of some hosts refuses a negative
// oom_score_adj even to root, and runc then fails every pod sandbox with
// "can't get final child's PID from pipe"; restricted, containerd asks no
// lower than its own. netns_mounts_under_state_dir keeps the pods'
// network namespaces under stateDir, where a killed run's are found.
func containerdConfig(data string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(data, "containerd"), filepath.Join(stateDir, "containerd"), containerdSocket(),
		pauseImage, filepath.Join(stateDir, "runc"), cniBinDir, filepath.Join(data, "cni"))
}

func containerdSocket() string { return filepath.Join(stateDir, "containerd.sock") }

// cniConfig: one bridge, the host its gateway, addresses from the pod
// CIDR with their state under the data directory. No masquerade: nothing
// leaves the host.
func cniConfig(data string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "shardns-kubenode",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
`, bridge, filepath.Join(data, "cni-ipam"), podCIDR, hostIP)
}

// kubeletConfig: cgroupfs without QoS cgroups (the host's cgroups are
// whatever it has), no eviction and no image garbage collection (the
// images cannot be pulled again), no iptables chains of kubelet's own,
// kubeadm's cluster DNS, logs large enough that a test reading one whole
// never sees it rotated, and a resolv.conf of the node's own for pods with
// dnsPolicy: Default, so that nothing a pod forwards leaves the host.
func kubeletConfig(data string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %s
podLogsDir: %s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {}
localStorageCapacityIsolation: false
makeIPTablesUtilChains: false
serializeImagePulls: false
volumeStatsAggPeriod: 0s
containerLogMaxSize: 100Mi
`, hostIP, kubeletPort, containerdSocket(), ClusterDNS, clusterDomain,
		filepath.Join(data, "resolv.conf"), filepath.Join(data, "pod-logs"))
}

// nodeResolvConf is the node's resolv.conf for dnsPolicy: Default pods,
// the shardns replicas among them: the node's resolver (upstream) on the
// host's bridge address.
func nodeResolvConf() string { return "nameserver " + hostIP + "\n" }

// kubeconfig is the admin kubeconfig every component and the tests use.
func kubeconfig(token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubenode
  cluster:
    server: https://%s:%d
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: kubenode
  context:
    cluster: kubenode
    user: admin
current-context: kubenode
`, hostIP, apiserverPort, token)
}
