package nodetier

import (
	"context"
	"errors"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/integration/kubeapi"
)

// renderWithComponent renders a kustomization of the user's: the base
// plus deploy/components/NAME.
func renderWithComponent(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources: [%s/base]\ncomponents: [%s/components/%s]\n", rel, rel, name)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// The federation component grants get on nodes, nothing else, and the
// replicas know their node's name to read.
func TestDeployFederationComponent(t *testing.T) {
	objs := renderWithComponent(t, "federation")
	var role rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "shardns-federation", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"nodes"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"get"}) || !slices.Equal(role.Rules[0].APIGroups, []string{""}) {
		t.Errorf("federation ClusterRole rules %+v, want get on nodes only", role.Rules)
	}
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", "shardns-federation", &binding)
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "shardns" {
		t.Errorf("federation binding %+v, want the shardns service account bound to %s", binding, role.Name)
	}
	var sts appsv1.StatefulSet
	find(t, objs, "StatefulSet", "shardns", &sts)
	nodeName := false
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		nodeName = nodeName || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	if !nodeName {
		t.Error("the StatefulSet does not set NODE_NAME from spec.nodeName")
	}
}

// The topology component grants get on nodes, nothing else, to the
// replicas and to the node-local processes, which read their own Node's
// zone.
func TestDeployTopologyComponent(t *testing.T) {
	objs := renderWithComponent(t, "topology")
	var role rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "shardns-topology", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"nodes"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"get"}) || !slices.Equal(role.Rules[0].APIGroups, []string{""}) {
		t.Errorf("topology ClusterRole rules %+v, want get on nodes only", role.Rules)
	}
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", "shardns-topology", &binding)
	var names []string
	for _, s := range binding.Subjects {
		if s.Kind == "ServiceAccount" && s.Namespace == "kube-system" {
			names = append(names, s.Name)
		}
	}
	if binding.RoleRef.Name != role.Name || !slices.Equal(names, []string{"shardns", "shardns-nodelocal"}) {
		t.Errorf("topology binding %+v, want the shardns and shardns-nodelocal service accounts bound to %s", binding, role.Name)
	}
}

func TestDeployServiceMonitorComponent(t *testing.T) {
	objs := renderWithComponent(t, "servicemonitor")
	sm := find(t, objs, "ServiceMonitor", "shardns", nil)
	if len(objs) != len(render(t, deployDir))+1 {
		t.Errorf("base plus component renders %d objects, want the base's and one ServiceMonitor", len(objs))
	}
	// The ServiceMonitor selects the peer Service, by a port it has.
	var peers corev1.Service
	find(t, objs, "Service", "shardns-peers", &peers)
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if peers.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which shardns-peers does not carry", k, v)
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	for _, e := range eps {
		port, _ := e.(map[string]any)["port"].(string)
		if !slices.ContainsFunc(peers.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == port }) {
			t.Errorf("ServiceMonitor scrapes port %q, which shardns-peers does not have", port)
		}
	}

	cp := kubeapi.Shared(t)
	a := newApplier(t, cp)
	installServiceMonitorCRD(t, a)
	a.applyAll(t, objs)
}

// installServiceMonitorCRD installs a minimal ServiceMonitor CRD (schema
// open, as validating the Prometheus Operator's own schema is not ours to
// do) and waits until the apiserver serves it.
func installServiceMonitorCRD(t *testing.T, a *applier) {
	t.Helper()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "servicemonitors.monitoring.coreos.com"},
		"spec": map[string]any{
			"group": "monitoring.coreos.com",
			"scope": "Namespaced",
			"names": map[string]any{"kind": "ServiceMonitor", "listKind": "ServiceMonitorList",
				"plural": "servicemonitors", "singular": "servicemonitor"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				}},
			}},
		},
	}}
	ctx := context.Background()
	crds := a.dyn.Resource(crdGVR)
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Waited for, so that a next run (-count) can create it again.
		crds.Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
		waitFor(deployTimeout, func() error {
			_, err := crds.Get(context.Background(), crd.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("CRD %s still present (%v)", crd.GetName(), err)
		})
	})
	gk := schema.GroupKind{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}
	err := waitFor(deployTimeout, func() error {
		a.mapper.Reset()
		_, err := a.mapper.RESTMapping(gk, "v1")
		return err
	})
	if err != nil {
		t.Fatalf("the ServiceMonitor CRD is not served after %v: %v", deployTimeout, err)
	}
}

// waitFor retries f until it returns nil or timeout passes, returning its
// last error.
func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(errors.New("timed out"), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The node-local overlay adds a DaemonSet whose configuration is a valid
// nodelocal one, that listens where the pod's ports and probes say, and
// that finds the replicas through the peers Service the base creates.
func TestDeployNodeLocal(t *testing.T) {
	objs := render(t, "../../deploy/overlays/nodelocal")
	checkStatefulSet(t, objs)
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", "shardns-nodelocal", &ds)
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSDefault {
		t.Errorf("hostNetwork %v dnsPolicy %q, want the host network and the node's resolvers", pod.HostNetwork, pod.DNSPolicy)
	}
	c := pod.Containers[0]
	if caps := c.SecurityContext.Capabilities; caps == nil || !slices.Equal(caps.Add, []corev1.Capability{"NET_BIND_SERVICE"}) ||
		!slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("shardns container capabilities %+v, want ALL dropped and NET_BIND_SERVICE only", caps)
	}
	cm := find(t, objs, "ConfigMap", "shardns-nodelocal-", nil)
	text, _, _ := unstructured.NestedString(cm.Object, "data", "shardns.yaml")
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the node-local shardns.yaml does not load: %v", err)
	}
	if cfg.Mode != config.ModeNodeLocal || !slices.Equal(cfg.DNS.Listen, []string{"169.254.20.10:53"}) {
		t.Errorf("mode %q listen %v, want nodelocal on 169.254.20.10:53", cfg.Mode, cfg.DNS.Listen)
	}
	if v := pod.Volumes[0].ConfigMap; v == nil || v.Name != cm.GetName() {
		t.Errorf("volume mounts %+v, want the generated %q", v, cm.GetName())
	}
	checkNodeLocalRollout(t, &ds, cfg)
	_, httpPort, _ := strings.Cut(cfg.HTTP.Listen, ":")
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != httpPort {
			t.Errorf("probe %+v does not reach http.listen %s", p, cfg.HTTP.Listen)
		}
	}
	var peers corev1.Service
	find(t, objs, "Service", "shardns-peers", &peers)
	if want := peers.Namespace + "/" + peers.Name; cfg.Cluster.JoinService != want {
		t.Errorf("cluster.joinService %q, want the peers Service %q", cfg.Cluster.JoinService, want)
	}
	// The replicas admit the node-local processes through their Service;
	// the node-local processes hold the credential the replicas write,
	// never the replicas' key, and may read no other Secret.
	var nlPeers corev1.Service
	find(t, objs, "Service", "shardns-nodelocal-peers", &nlPeers)
	if !labels.SelectorFromSet(nlPeers.Spec.Selector).Matches(labels.Set(ds.Spec.Template.Labels)) || !nlPeers.Spec.PublishNotReadyAddresses {
		t.Errorf("shardns-nodelocal-peers selects %v, not every DaemonSet pod", nlPeers.Spec.Selector)
	}
	replicas := checkConfig(t, find(t, objs, "ConfigMap", "shardns-", nil))
	if want := nlPeers.Namespace + "/" + nlPeers.Name; !slices.Contains(replicas.Cluster.AdmitServices, want) {
		t.Errorf("the replicas admit %v, not %s", replicas.Cluster.AdmitServices, want)
	}
	if cfg.Cluster.Secret != "" || cfg.Cluster.SecretKeyFile != "" {
		t.Errorf("node-local cluster.secret %q secretKeyFile %q: it must not hold the replicas' key", cfg.Cluster.Secret, cfg.Cluster.SecretKeyFile)
	}
	if cfg.Cluster.NodeLocalSecret != replicas.Cluster.NodeLocalSecret || cfg.Cluster.NodeLocalSecret == "" {
		t.Errorf("node-local cluster.nodeLocalSecret %q, replicas' %q: they must name the same Secret",
			cfg.Cluster.NodeLocalSecret, replicas.Cluster.NodeLocalSecret)
	}
	var nlRole rbacv1.Role
	find(t, objs, "Role", "shardns-nodelocal", &nlRole)
	for _, r := range nlRole.Rules {
		if slices.Contains(r.Resources, "secrets") && !slices.Equal(r.ResourceNames, []string{"shardns-nodelocal-credential"}) {
			t.Errorf("the node-local Role may read Secrets %v, want shardns-nodelocal-credential only", r.ResourceNames)
		}
	}
	// Its clients are its node's pods: it knows its node, and may list
	// and watch pods, nothing more cluster-wide.
	nodeName := false
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("the node-local container has no NODE_NAME from spec.nodeName: %+v", c.Env)
	}
	// It reads no pod unless the clients component is added (autopath,
	// nodeLocal.aaaa): then list and watch of pods, nothing more.
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && strings.HasPrefix(o.GetName(), "shardns-nodelocal") {
			t.Errorf("the node-local overlay grants ClusterRole %s: without autopath it reads no pod", o.GetName())
		}
	}
	if cfg.WatchesClients() {
		t.Error("the node-local configuration watches pods without the clients component")
	}
	var nlCluster rbacv1.ClusterRole
	find(t, render(t, overlayWith(t, "../../deploy/overlays/nodelocal", "../../deploy/components/nodelocal-clients")),
		"ClusterRole", "shardns-nodelocal-clients", &nlCluster)
	if len(nlCluster.Rules) != 1 || !slices.Equal(nlCluster.Rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(nlCluster.Rules[0].Verbs, []string{"list", "watch"}) {
		t.Errorf("the node-local clients ClusterRole grants %+v, want list and watch of pods only", nlCluster.Rules)
	}
	checkSeccomp(t, objs)
	var np networkingv1.NetworkPolicy
	find(t, objs, "NetworkPolicy", "shardns-from-nodelocal", &np)
	for _, rule := range np.Spec.Ingress {
		for _, f := range rule.From {
			if f.IPBlock == nil || f.IPBlock.CIDR == "0.0.0.0/0" {
				t.Errorf("shardns-from-nodelocal admits %+v, want the nodes' CIDR", f)
			}
		}
		for _, p := range rule.Ports {
			if p.Port.String() != "remote" {
				t.Errorf("shardns-from-nodelocal opens %s; a node-local process only asks on remote", p.Port.String())
			}
		}
	}
	newApplier(t, kubeapi.Shared(t)).applyAll(t, objs)
}

// The autoscaling examples apply, and scale the StatefulSet the base
// creates.
func TestDeployAutoscalingExamples(t *testing.T) {
	var objs []*unstructured.Unstructured
	for _, f := range []string{"hpa.yaml", "cluster-proportional-autoscaler.yaml"} {
		data, err := os.ReadFile(filepath.Join(deployDir, "examples", "autoscaling", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, u)
		}
	}
	hpa := find(t, objs, "HorizontalPodAutoscaler", "shardns", nil)
	if kind, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "kind"); kind != "StatefulSet" {
		t.Errorf("the HPA scales a %s, want the StatefulSet", kind)
	}
	var cpa appsv1.Deployment
	find(t, objs, "Deployment", "shardns-autoscaler", &cpa)
	if !slices.Contains(cpa.Spec.Template.Spec.Containers[0].Args, "--target=StatefulSet/shardns") {
		t.Errorf("cluster-proportional-autoscaler args %v do not target the StatefulSet", cpa.Spec.Template.Spec.Containers[0].Args)
	}
	newApplier(t, kubeapi.Shared(t)).applyAll(t, objs)
}

// checkNodeLocalRollout checks what a zero-loss rollout of the node-local
// DaemonSet needs: the new pod on each node before the old one goes
// (maxSurge 1, maxUnavailable 0), a pod the scheduler can place beside
// the old one (no hostPort, which every listed port on the host network
// is), no fixed port of its own the old process holds (the actor remote
// takes one from the system; DNS and HTTP are shared), readiness on
// /ready, and a grace period beyond the lameduck and the drain.
func checkNodeLocalRollout(t *testing.T, ds *appsv1.DaemonSet, cfg *config.Config) {
	t.Helper()
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil ||
		ru.MaxSurge == nil || ru.MaxSurge.String() != "1" || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "0" {
		t.Errorf("DaemonSet updateStrategy %+v, want RollingUpdate with maxSurge 1 and maxUnavailable 0", ds.Spec.UpdateStrategy)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if len(c.Ports) > 0 {
			t.Errorf("container %s lists ports %+v: hostPorts on the host network, which keep a surge pod Pending", c.Name, c.Ports)
		}
	}
	if _, port, _ := strings.Cut(cfg.Cluster.Remote, ":"); port != "0" {
		t.Errorf("cluster.remote %q: a fixed port is held by the old process while the new one starts", cfg.Cluster.Remote)
	}
	if p := ds.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" {
		t.Errorf("readiness probe %+v, want /ready: the old pod goes once the new one has the ring", p)
	}
	grace := ds.Spec.Template.Spec.TerminationGracePeriodSeconds
	if need := cfg.HTTP.Lameduck.D() + 2*time.Second; grace == nil || time.Duration(*grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %v, want more than the lameduck and the drain (%v)", grace, need)
	}
}
