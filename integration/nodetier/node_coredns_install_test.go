package nodetier

// CoreDNS's objects written as kubeadm's addon phase writes them, for the
// way back and forth between CoreDNS and shardns (node_coredns_test.go).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubenode"
)

// kubeadmManager is the field manager of what the test writes as kubeadm.
const kubeadmManager = "kubeadm"

// installCoreDNS creates or updates CoreDNS's objects as kubeadm's addon
// phase does, with replicas pods, but for kube-dns: the Service the
// cluster has is kept (kubeadmKubeDNS writes kubeadm's).
func (c *nodeCluster) installCoreDNS(t *testing.T, replicas int32) {
	t.Helper()
	ctx := context.Background()
	image := c.coreDNSImageOnNode(t)
	create := metav1.CreateOptions{FieldManager: kubeadmManager}
	update := metav1.UpdateOptions{FieldManager: kubeadmManager}
	// createOrUpdate is kubeadm's apiclient.CreateOrUpdate*: create, and
	// update what exists.
	createOrUpdate := func(what string, create, update func() error) {
		err := create()
		if apierrors.IsAlreadyExists(err) {
			err = update()
		}
		if err != nil {
			t.Fatalf("installing CoreDNS's %s as kubeadm does: %v", what, err)
		}
	}
	var sa corev1.ServiceAccount
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	var cm corev1.ConfigMap
	var deploy appsv1.Deployment
	decodeManifest(t, kubeadmCoreDNSServiceAccount, &sa)
	decodeManifest(t, kubeadmCoreDNSClusterRole, &role)
	decodeManifest(t, kubeadmCoreDNSClusterRoleBinding, &binding)
	decodeManifest(t, kubeadmCoreDNSConfigMap, &cm)
	decodeManifest(t, fmt.Sprintf(kubeadmCoreDNSDeployment, replicas, image), &deploy)
	core, rbac, apps := c.client().CoreV1(), c.client().RbacV1(), c.client().AppsV1()
	createOrUpdate("ConfigMap", func() error { _, err := core.ConfigMaps("kube-system").Create(ctx, &cm, create); return err },
		func() error { _, err := core.ConfigMaps("kube-system").Update(ctx, &cm, update); return err })
	createOrUpdate("ClusterRole", func() error { _, err := rbac.ClusterRoles().Create(ctx, &role, create); return err },
		func() error { _, err := rbac.ClusterRoles().Update(ctx, &role, update); return err })
	createOrUpdate("ClusterRoleBinding", func() error { _, err := rbac.ClusterRoleBindings().Create(ctx, &binding, create); return err },
		func() error { _, err := rbac.ClusterRoleBindings().Update(ctx, &binding, update); return err })
	createOrUpdate("ServiceAccount", func() error { _, err := core.ServiceAccounts("kube-system").Create(ctx, &sa, create); return err },
		func() error { _, err := core.ServiceAccounts("kube-system").Update(ctx, &sa, update); return err })
	createOrUpdate("Deployment", func() error { _, err := apps.Deployments("kube-system").Create(ctx, &deploy, create); return err },
		func() error { _, err := apps.Deployments("kube-system").Update(ctx, &deploy, update); return err })
	t.Logf("CoreDNS installed as kubeadm installs it, image %s, %d replicas", image, replicas)
}

// kubeadmKubeDNS writes kube-dns as kubeadm's addon phase does: create,
// and where a Service exists (or holds the address), an unconditional
// update to kubeadm's, which keeps the address.
func (c *nodeCluster) kubeadmKubeDNS(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var svc corev1.Service
	decodeManifest(t, fmt.Sprintf(kubeadmKubeDNSService, kubenode.ClusterDNS), &svc)
	services := c.client().CoreV1().Services("kube-system")
	_, err := services.Create(ctx, &svc, metav1.CreateOptions{FieldManager: kubeadmManager})
	if apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) {
		_, err = services.Update(ctx, &svc, metav1.UpdateOptions{FieldManager: kubeadmManager})
	}
	if err != nil {
		t.Fatalf("writing kube-dns as kubeadm does: %v", err)
	}
	got := c.kubeDNSService(t)
	if p := got.Spec.Ports[2]; p.Name != "metrics" || p.TargetPort != intstr.FromInt32(9153) {
		t.Fatalf("kube-dns after kubeadm's update: metrics port %+v, want kubeadm's target port 9153", p)
	}
}

// decodeManifest reads a YAML manifest into obj.
func decodeManifest(t *testing.T, manifest string, obj any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(manifest), obj); err != nil {
		t.Fatalf("%v in:\n%s", err, manifest)
	}
}

// coreDNSImageOnNode builds a CoreDNS image FROM scratch around the
// binary of scripts/build-coredns.sh, the CoreDNS `make bench` compares
// shardns with, imports it into the node once, and returns its name
// there. It runs as root: the released image runs as a non-root user
// whose binary carries the NET_BIND_SERVICE file capability, set with
// setcap in a build stage; a FROM-scratch build with nothing pulled has no
// setcap to run. kubeadm's pod spec adds the capability, which root gets.
func (c *nodeCluster) coreDNSImageOnNode(t *testing.T) string {
	t.Helper()
	if c.coreDNSImage != "" {
		return c.coreDNSImage
	}
	bin := harness.BuildCoreDNS(t)
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		t.Fatalf("%s -version: %v", bin, err)
	}
	// "CoreDNS-1.15.0" on the first line.
	version := strings.TrimPrefix(strings.Fields(string(out))[0], "CoreDNS-")
	dir := t.TempDir()
	if err := copyExecutable(bin, filepath.Join(dir, "coredns")); err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT [\"/coredns\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	build := fmt.Sprintf("%scoredns-%d:v%s", kubenode.ImageDomain, os.Getpid(), version)
	t.Cleanup(func() { docker("rmi", build) })
	mustDocker(t, "build", "-q", "-t", build, dir)
	c.coreDNSImage = kubenode.ImageDomain + "coredns:v" + version
	c.node.ImportDockerImage(t, build, c.coreDNSImage)
	return c.coreDNSImage
}

// copyExecutable copies the file at src to dst, executable.
func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
