package nodetier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/integration/kubeapi"
)

// The deploy/ manifests, rendered as `kubectl apply -k` renders them, must
// be accepted by a real apiserver and keep the promises deploy/README.md
// makes. Objects are applied server-side with dryRun=All, so nothing stays
// in the shared control plane.

const (
	deployDir      = "../../deploy"
	replaceCoreDNS = "../../deploy/overlays/replace-coredns"
	// kubeDNSIP is kubeadm's kube-dns address, which the base sets and
	// the replace-coredns overlay keeps.
	kubeDNSIP = "10.96.0.10"
	// deployTimeout bounds each wait on the apiserver (a CRD to become
	// established, discovery to show it).
	deployTimeout = 30 * time.Second
)

// overlayWith writes an overlay of base with components added, as a
// user's overlay does, and returns its folder.
func overlayWith(t *testing.T, base string, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, abs) // kustomize takes relative paths only
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + rel(base) + "]\ncomponents:\n"
	for _, c := range components {
		k += "  - " + rel(c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkSeccomp checks that every pod template of objs runs under the
// container runtime's default seccomp profile.
func checkSeccomp(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	pods := 0
	for _, o := range objs {
		profile, found, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "securityContext", "seccompProfile", "type")
		if _, isPod, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec"); !isPod {
			continue
		}
		pods++
		if !found || profile != "RuntimeDefault" {
			t.Errorf("%s %s: pod seccompProfile %q, want RuntimeDefault", o.GetKind(), o.GetName(), profile)
		}
	}
	if pods == 0 {
		t.Error("no pod template rendered")
	}
}

// render runs kustomize on dir as `kubectl kustomize dir` does.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%s: %v", y, err)
		}
		objs = append(objs, u)
	}
	return objs
}

// find returns the one rendered object of kind and name; a name ending in
// "-" matches kustomize's generated names (name-<hash>).
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		n := o.GetName()
		// kustomize's hash suffix has no dash: shardns- is not shardns-nodelocal-.
		generated := strings.HasSuffix(name, "-") && strings.HasPrefix(n, name) && !strings.Contains(n[len(name):], "-")
		if o.GetKind() == kind && (n == name || generated) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %q in the rendered manifests, found %d", kind, name, len(found))
	}
	if into != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, into); err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
	}
	return found[0]
}

// applier applies objects server-side with dryRun=All, as
// `kubectl apply --server-side --dry-run=server` does, or for real.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	real   bool // apply for real, as `kubectl apply --server-side` does
}

func newApplier(t *testing.T, cp *kubeapi.ControlPlane) *applier {
	t.Helper()
	return newApplierFor(t, cp.RESTConfig(), false)
}

// newApplierFor applies through cfg, for real if real is set.
func newApplierFor(t *testing.T, cfg *rest.Config, real bool) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	return &applier{dyn: dyn, mapper: mapper, real: real}
}

func (a *applier) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// apply applies obj, with dryRun=All unless a.real; force takes over
// fields other managers own, as --force-conflicts does.
func (a *applier) apply(obj *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error) {
	r, err := a.resource(obj)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: "shardns-deploy-test", Force: force}
	if !a.real {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return r.Apply(context.Background(), obj.GetName(), obj, opts)
}

// applyAll applies every object and fails t naming each one refused.
func (a *applier) applyAll(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	what := "server-side dry run"
	if a.real {
		what = "server-side apply"
	}
	for _, o := range objs {
		if _, err := a.apply(o, true); err != nil {
			t.Errorf("%s of %s %s/%s: %v", what, o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func TestDeployBase(t *testing.T) {
	objs := render(t, deployDir)
	checkStatefulSet(t, objs)
	checkServices(t, objs)
	checkRBAC(t, objs)
	checkTrust(t, objs, checkConfig(t, find(t, objs, "ConfigMap", "shardns-", nil)))
	var kubeDNS corev1.Service
	find(t, objs, "Service", "kube-dns", &kubeDNS)
	// kubelet's clusterDNS names a fixed address; kubeadm's is the
	// tenth of the Service range. Without it the Service would get a
	// random one no pod asks (TestNode/ApplyAndResolve showed it).
	if kubeDNS.Spec.ClusterIP != kubeDNSIP {
		t.Errorf("the base sets kube-dns clusterIP %q, want kubeadm's %s, where kubelet's clusterDNS points", kubeDNS.Spec.ClusterIP, kubeDNSIP)
	}
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" {
			t.Error("the base holds a ServiceMonitor; it belongs in components/servicemonitor")
		}
	}

	cp := kubeapi.Shared(t)
	newApplier(t, cp).applyAll(t, objs)
	checkPodSecurityRestricted(t, cp, objs)
}

// checkStatefulSet checks what deploy/README.md promises of the replicas,
// and that the pod spec agrees with the configuration it mounts.
func checkStatefulSet(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	if sts.Namespace != "kube-system" {
		t.Errorf("namespace %q, want kube-system", sts.Namespace)
	}
	if r := sts.Spec.Replicas; r == nil || *r != 3 {
		t.Errorf("replicas %v, want 3", r)
	}
	if p := sts.Spec.PodManagementPolicy; p != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q, want Parallel", p)
	}
	pod := sts.Spec.Template.Spec
	if pod.DNSPolicy != corev1.DNSDefault {
		t.Errorf("dnsPolicy %q, want Default (shardns must not resolve through itself)", pod.DNSPolicy)
	}
	if pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q, want system-cluster-critical", pod.PriorityClassName)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/ready"}, {"livenessProbe", c.LivenessProbe, "/health"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: want an HTTP GET of %s, got %+v", p.name, p.path, p.probe)
		} else if port := containerPort(c, p.probe.HTTPGet.Port, corev1.ProtocolTCP); port != 8080 {
			t.Errorf("%s port %v is %d, want the http.listen port 8080", p.name, p.probe.HTTPGet.Port, port)
		}
	}
	checkSecurityContext(t, pod, c)

	cm := find(t, objs, "ConfigMap", "shardns-", nil)
	cfg := checkConfig(t, cm)
	for _, v := range pod.Volumes {
		// The replace-coredns overlay mounts the cluster's own Corefile.
		if v.ConfigMap != nil && v.ConfigMap.Name != cm.GetName() && v.ConfigMap.Name != "coredns" && v.ConfigMap.Name != "coredns-custom" {
			t.Errorf("volume %s mounts ConfigMap %q, want the generated %q", v.Name, v.ConfigMap.Name, cm.GetName())
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.HTTP.Lameduck.D() {
		t.Errorf("terminationGracePeriodSeconds %v must exceed http.lameduck %v", g, cfg.HTTP.Lameduck.D())
	}
	// Every port the configuration listens on is a port of the container.
	for _, want := range []struct {
		port  int32
		proto corev1.Protocol
	}{{53, corev1.ProtocolUDP}, {53, corev1.ProtocolTCP}, {8080, corev1.ProtocolTCP},
		{7946, corev1.ProtocolUDP}, {7946, corev1.ProtocolTCP}, {8090, corev1.ProtocolTCP}} {
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return p.ContainerPort == want.port && p.Protocol == want.proto
		}) {
			t.Errorf("container has no port %d/%s", want.port, want.proto)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "GOMAXPROCS" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.cpu"
	}) {
		t.Error("GOMAXPROCS is not taken from limits.cpu")
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; !ok {
		t.Error("GOMAXPROCS comes from limits.cpu, but no CPU limit is set")
	}
}

func checkSecurityContext(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("runAsNonRoot is not true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("runAsUser %v, want a non-root uid", sc.RunAsUser)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if caps := sc.Capabilities; caps == nil ||
		!slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(caps.Add, []corev1.Capability{"NET_BIND_SERVICE"}) {
		t.Errorf("capabilities %+v, want drop [ALL], add [NET_BIND_SERVICE] only", caps)
	}
	// uid 65532 binds :53 through this sysctl (see statefulset.yaml).
	psc := pod.SecurityContext
	if psc == nil || !slices.Contains(psc.Sysctls, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}) {
		t.Error("the pod does not set net.ipv4.ip_unprivileged_port_start to 53: a non-root shardns cannot bind :53")
	}
}

// checkConfig parses the ConfigMap's shardns.yaml as shardns does at start.
func checkConfig(t *testing.T, cm *unstructured.Unstructured) *config.Config {
	t.Helper()
	data, _, _ := unstructured.NestedString(cm.Object, "data", "shardns.yaml")
	if data == "" {
		t.Fatalf("ConfigMap %s has no shardns.yaml", cm.GetName())
	}
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("ConfigMap %s: shardns.yaml does not validate: %v", cm.GetName(), err)
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"dns.listen", cfg.DNS.Listen, []string{"0.0.0.0:53"}},
		{"http.listen", cfg.HTTP.Listen, "0.0.0.0:8080"},
		{"kubernetes.enabled", cfg.Kubernetes.Enabled, true},
		{"kubernetes.kubeconfig", cfg.Kubernetes.Kubeconfig, ""},
		{"cluster.nodeName", cfg.Cluster.NodeName, ""}, // the pod name, by default
		{"cluster.joinService", cfg.Cluster.JoinService, "kube-system/shardns-peers"},
		{"cluster.bind", cfg.Cluster.Bind, "0.0.0.0:7946"},
		{"cluster.remote", cfg.Cluster.Remote, "0.0.0.0:8090"},
		{"cluster.replicationFactor", *cfg.Cluster.ReplicationFactor, 2},
		{"forward.upstreams", cfg.Forward.Upstreams, []string{"/etc/resolv.conf"}},
		{"cache.enabled", cfg.Cache.Enabled, true},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("shardns.yaml %s = %v, want %v", c.key, c.got, c.want)
		}
	}
	return cfg
}

// checkServices checks that kube-dns reaches the shardns pods on CoreDNS's
// ports, and that the peer Service publishes pods before they are ready.
func checkServices(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	podLabels := sts.Spec.Template.Labels
	c := sts.Spec.Template.Spec.Containers[0]

	var kubeDNS, peers corev1.Service
	find(t, objs, "Service", "kube-dns", &kubeDNS)
	find(t, objs, "Service", "shardns-peers", &peers)
	if kubeDNS.Namespace != "kube-system" || kubeDNS.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("kube-dns: namespace %q labels %v, want kube-system and k8s-app: kube-dns", kubeDNS.Namespace, kubeDNS.Labels)
	}
	wantKubeDNS := map[string]int32{"dns/UDP/53": 53, "dns-tcp/TCP/53": 53, "metrics/TCP/9153": 8080}
	checkServicePorts(t, kubeDNS, c, wantKubeDNS)
	if kubeDNS.Spec.Type != corev1.ServiceTypeClusterIP && kubeDNS.Spec.Type != "" {
		t.Errorf("kube-dns type %q, want ClusterIP", kubeDNS.Spec.Type)
	}
	if peers.Spec.ClusterIP != corev1.ClusterIPNone || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("shardns-peers: clusterIP %q publishNotReadyAddresses %v, want None and true",
			peers.Spec.ClusterIP, peers.Spec.PublishNotReadyAddresses)
	}
	if sts.Spec.ServiceName != peers.Name {
		t.Errorf("StatefulSet serviceName %q, want %q", sts.Spec.ServiceName, peers.Name)
	}
	wantPeers := map[string]int32{"tcp-gossip/TCP/7946": 7946, "udp-gossip/UDP/7946": 7946,
		"tcp-remote/TCP/8090": 8090, "http-metrics/TCP/8080": 8080}
	checkServicePorts(t, peers, c, wantPeers)
	for _, s := range []corev1.Service{kubeDNS, peers} {
		for k, v := range s.Spec.Selector {
			if podLabels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the shardns pods do not carry (%v)", s.Name, k, v, podLabels)
			}
		}
	}
	pdb := find(t, objs, "PodDisruptionBudget", "shardns", nil)
	if v, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(v) != "1" {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", v)
	}
}

// checkServicePorts checks a Service's ports, keyed name/protocol/port, and
// the container port each target port resolves to.
func checkServicePorts(t *testing.T, s corev1.Service, c corev1.Container, want map[string]int32) {
	t.Helper()
	got := map[string]int32{}
	for _, p := range s.Spec.Ports {
		got[fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.Port)] = containerPort(c, p.TargetPort, p.Protocol)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Service %s ports (name/protocol/port: container port) %v, want %v", s.Name, got, want)
	}
}

// containerPort resolves a target port, by name or number, to the
// container's port number; 0 if the container has no such port.
func containerPort(c corev1.Container, target intstr.IntOrString, proto corev1.Protocol) int32 {
	for _, p := range c.Ports {
		if p.Protocol != proto {
			continue
		}
		if target.Type == intstr.String && p.Name == target.StrVal ||
			target.Type == intstr.Int && p.ContainerPort == target.IntVal {
			return p.ContainerPort
		}
	}
	return 0
}

// checkRBAC checks that shardns may only read, and only what it watches.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRole", "shardns", &role)
	find(t, objs, "ClusterRoleBinding", "shardns", &binding)
	find(t, objs, "ServiceAccount", "shardns", nil)
	granted := map[string]bool{}
	for _, r := range role.Rules {
		if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("rule %+v: verbs %v, want exactly get, list, watch", r, r.Verbs)
		}
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: unexpected resourceNames or nonResourceURLs", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted[g+"/"+res] = true
			}
		}
	}
	want := []string{"/services", "discovery.k8s.io/endpointslices", "/namespaces", "/pods",
		"networking.istio.io/serviceentries", "multicluster.x-k8s.io/serviceimports",
		"gateway.networking.k8s.io/gateways", "gateway.networking.k8s.io/httproutes",
		"gateway.networking.k8s.io/grpcroutes", "gateway.networking.k8s.io/tlsroutes", "networking.k8s.io/ingresses"}
	for _, w := range want {
		if !granted[w] {
			t.Errorf("ClusterRole does not grant %s", w)
		}
	}
	if len(granted) != len(want) {
		t.Errorf("ClusterRole grants %v, want only %v", granted, want)
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != "shardns" ||
		binding.Subjects[0].Namespace != "kube-system" {
		t.Errorf("ClusterRoleBinding %+v does not bind %s to kube-system/shardns", binding, role.Name)
	}
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	if sa := sts.Spec.Template.Spec.ServiceAccountName; sa != "shardns" {
		t.Errorf("pods run as ServiceAccount %q, want shardns", sa)
	}
}

// checkTrust: the replicas get the gossip key from a Secret they may read
// and fill and nothing else, and write the node-local credential into a
// second one; gossip and remote are admitted from the shardns pods only,
// DNS from anywhere; the configuration requires the key and admits only
// the peers Services' endpoints.
func checkTrust(t *testing.T, objs []*unstructured.Unstructured, cfg *config.Config) {
	t.Helper()
	var secret corev1.Secret
	find(t, objs, "Secret", "shardns-gossip", &secret)
	if len(secret.Data) != 0 || len(secret.StringData) != 0 {
		t.Errorf("the gossip Secret ships data %v: a later apply would overwrite the generated key", secret.Data)
	}
	if want := secret.Namespace + "/" + secret.Name; cfg.Cluster.Secret != want || cfg.Cluster.Insecure {
		t.Errorf("cluster.secret %q insecure %v, want %q and secure", cfg.Cluster.Secret, cfg.Cluster.Insecure, want)
	}
	if !slices.Contains(cfg.Cluster.AdmitServices, "kube-system/shardns-nodelocal-peers") || cfg.Cluster.JoinService == "" {
		t.Errorf("cluster.joinService %q admitServices %v", cfg.Cluster.JoinService, cfg.Cluster.AdmitServices)
	}
	var credential corev1.Secret
	find(t, objs, "Secret", "shardns-nodelocal-credential", &credential)
	if len(credential.Data) != 0 || len(credential.StringData) != 0 {
		t.Errorf("the node-local credential Secret ships data %v", credential.Data)
	}
	if want := credential.Namespace + "/" + credential.Name; cfg.Cluster.NodeLocalSecret != want {
		t.Errorf("cluster.nodeLocalSecret %q, want %q", cfg.Cluster.NodeLocalSecret, want)
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	find(t, objs, "Role", "shardns-gossip", &role)
	find(t, objs, "RoleBinding", "shardns-gossip", &binding)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"secrets"}) ||
		!slices.Equal(role.Rules[0].ResourceNames, []string{"shardns-gossip", "shardns-nodelocal-credential"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"get", "update"}) {
		t.Errorf("Role shardns-gossip %+v, want get and update on the two Secrets", role.Rules)
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "shardns" {
		t.Errorf("RoleBinding %+v does not bind the Role to shardns only", binding)
	}
	var np networkingv1.NetworkPolicy
	find(t, objs, "NetworkPolicy", "shardns", &np)
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	if !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy selects %v, not the replicas", np.Spec.PodSelector.MatchLabels)
	}
	fromPeersOnly := map[string]bool{}
	fromAnywhere := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			port := p.Port.String() + "/" + string(*p.Protocol)
			if len(rule.From) == 0 {
				fromAnywhere[port] = true
				continue
			}
			for _, f := range rule.From {
				if f.IPBlock != nil || f.NamespaceSelector != nil || f.PodSelector == nil ||
					!labels.SelectorFromSet(f.PodSelector.MatchLabels).Matches(labels.Set(sts.Spec.Template.Labels)) {
					t.Errorf("port %s admitted from %+v, want the shardns pods only", port, f)
				}
			}
			fromPeersOnly[port] = true
		}
	}
	for _, p := range []string{"dns/UDP", "dns-tcp/TCP", "metrics/TCP"} {
		if !fromAnywhere[p] {
			t.Errorf("NetworkPolicy does not admit %s from anywhere", p)
		}
	}
	for _, p := range []string{"gossip/UDP", "gossip-tcp/TCP", "remote/TCP"} {
		if !fromPeersOnly[p] || fromAnywhere[p] {
			t.Errorf("NetworkPolicy: %s must be admitted from the shardns pods only", p)
		}
	}
}

// checkPodSecurityRestricted creates (dry run) a pod of the StatefulSet's
// template in a namespace enforcing Pod Security "restricted".
func checkPodSecurityRestricted(t *testing.T, cp *kubeapi.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	// Without a controller-manager a deleted namespace stays Terminating:
	// a generated name lets the test run again in the same control plane.
	ns, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "deploy-restricted-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	pod := &corev1.Pod{ObjectMeta: sts.Spec.Template.ObjectMeta, Spec: sts.Spec.Template.Spec}
	pod.Name, pod.Namespace = "shardns-0", ns.Name
	_, err = cp.Client.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Errorf("a shardns pod is refused under Pod Security restricted: %v", err)
	}
}

// kubeDNSAddressPatch is the overlay deploy/README.md ("kube-dns address")
// gives for a cluster whose kubelets name another cluster DNS address.
const kubeDNSAddressPatch = `resources:
  - %s
patches:
  - target: {kind: Service, name: kube-dns}
    patch: |
      - op: replace
        path: /spec/clusterIP
        value: 10.43.0.10
`

// The documented way to give kube-dns another address renders, changes
// nothing else, and is accepted by a real apiserver whose Service range
// holds it.
func TestDeployKubeDNSAddress(t *testing.T) {
	dir := t.TempDir()
	deploy, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, deploy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(kubeDNSAddressPatch, rel)), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := render(t, dir)
	var kubeDNS corev1.Service
	find(t, objs, "Service", "kube-dns", &kubeDNS)
	if kubeDNS.Spec.ClusterIP != "10.43.0.10" {
		t.Errorf("kube-dns clusterIP %q, want the patched 10.43.0.10", kubeDNS.Spec.ClusterIP)
	}
	if base := render(t, deployDir); len(base) != len(objs) {
		t.Errorf("the patch renders %d objects, the base %d", len(objs), len(base))
	}
	// The shared apiserver's Service range is 10.96.0.0/16: the patched
	// address is outside it, and refused as users would see it.
	a := newApplier(t, kubeapi.Shared(t))
	if _, err := a.apply(find(t, objs, "Service", "kube-dns", nil), true); err == nil || !strings.Contains(err.Error(), "is not in the valid range") {
		t.Errorf("applying kube-dns at 10.43.0.10 on a cluster whose range is %v: got %v, want it refused as out of range", kubeapi.ServiceCIDRs, err)
	}
}

func TestDeployReplaceCoreDNS(t *testing.T) {
	objs := render(t, replaceCoreDNS)
	// The overlay changes the base in the kube-dns address and in what
	// the replicas serve (checkServesCorefile).
	base := render(t, deployDir)
	if len(objs) != len(base) {
		t.Errorf("the overlay renders %d objects, the base %d", len(objs), len(base))
	}
	var kubeDNS corev1.Service
	svc := find(t, objs, "Service", "kube-dns", &kubeDNS)
	if kubeDNS.Spec.ClusterIP != kubeDNSIP {
		t.Errorf("kube-dns clusterIP %q, want %s", kubeDNS.Spec.ClusterIP, kubeDNSIP)
	}
	checkStatefulSet(t, objs)
	checkServices(t, objs)
	checkServesCorefile(t, objs)

	cp := kubeapi.Shared(t)
	a := newApplier(t, cp)
	a.applyAll(t, objs)

	// The migration of deploy/overlays/replace-coredns/README.md: the
	// overlay applied onto the kube-dns Service kubeadm created keeps its
	// address and takes its ports and selector over.
	createKubeadmKubeDNS(t, cp)
	// kubeadm owns the metrics target port (9153; shardns names it): with
	// --server-side, the README's --force-conflicts is needed, and enough.
	if _, err := a.apply(svc, false); !apierrors.IsConflict(err) {
		t.Errorf("applying kube-dns without force over kubeadm's: got %v, want a conflict (the README says --force-conflicts)", err)
	}
	u, err := a.apply(svc, true)
	if err != nil {
		t.Fatalf("applying kube-dns over kubeadm's with force: %v", err)
	}
	var merged corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &merged); err != nil {
		t.Fatal(err)
	}
	if merged.Spec.ClusterIP != kubeDNSIP || fmt.Sprint(merged.Spec.Selector) != "map[k8s-app:kube-dns]" {
		t.Errorf("merged kube-dns: clusterIP %q selector %v, want %s and k8s-app=kube-dns",
			merged.Spec.ClusterIP, merged.Spec.Selector, kubeDNSIP)
	}
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	checkServicePorts(t, merged, sts.Spec.Template.Spec.Containers[0],
		map[string]int32{"dns/UDP/53": 53, "dns-tcp/TCP/53": 53, "metrics/TCP/9153": 8080})

	// A kube-dns address other than the cluster's is refused, not moved.
	wrong := svc.DeepCopy()
	unstructured.SetNestedField(wrong.Object, "10.96.0.11", "spec", "clusterIP")
	if _, err := a.apply(wrong, true); !apierrors.IsInvalid(err) {
		t.Errorf("applying kube-dns with another clusterIP: got %v, want it refused as invalid", err)
	}
}

// createKubeadmKubeDNS creates kube-dns as kubeadm does (its field
// manager, its labels, the metrics target port 9153) and deletes it when
// the test ends.
func createKubeadmKubeDNS(t *testing.T, cp *kubeapi.ControlPlane) {
	t.Helper()
	kubeadm := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: kubeDNSIP,
			Selector:  map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	services := cp.Client.CoreV1().Services("kube-system")
	if _, err := services.Create(context.Background(), kubeadm, metav1.CreateOptions{FieldManager: "kubeadm"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { services.Delete(context.Background(), kubeadm.Name, metav1.DeleteOptions{}) })
}

// checkServesCorefile: the replace-coredns overlay's replicas serve the
// cluster's own Corefile, from the coredns ConfigMap where CoreDNS has
// it, the coredns-custom ConfigMap beside it when there is one, with the
// base's shardns.yaml for what a Corefile cannot say.
func checkServesCorefile(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	c := sts.Spec.Template.Spec.Containers[0]
	want := []string{"/shardns", "serve", "--corefile", "/etc/coredns/Corefile", "--config", "/etc/shardns/shardns.yaml"}
	if !slices.Equal(c.Command, want) {
		t.Errorf("command %q, want %q", c.Command, want)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		switch {
		case v.ConfigMap == nil:
		case v.ConfigMap.Name == "coredns" && mounts[v.Name] != "/etc/coredns":
			t.Errorf("the coredns ConfigMap is mounted at %q, want /etc/coredns", mounts[v.Name])
		case v.ConfigMap.Name == "coredns-custom" && (mounts[v.Name] != "/etc/coredns/custom" || v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional):
			t.Errorf("the coredns-custom ConfigMap at %q (optional %v), want /etc/coredns/custom and optional", mounts[v.Name], v.ConfigMap.Optional)
		}
	}
	for _, name := range []string{"coredns", "coredns-custom"} {
		if !slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == name }) {
			t.Errorf("no volume of the %s ConfigMap", name)
		}
	}
}
