package kubenode

// Starting the node's servers, each once what it needs is up.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/kubeapi"
)

func (n *Node) startContainerd() error {
	p, err := n.start("containerd", "containerd", "--config", n.path("containerd.toml"))
	if err != nil {
		return err
	}
	return p.waitReady(containerdReady, func() error {
		_, err := run("ctr", "--address", containerdSocket(), "version")
		return err
	})
}

func (n *Node) startEtcd() error {
	client := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(etcdPeerPort)
	p, err := n.start("etcd", "etcd",
		"--name=kubenode", "--data-dir="+n.path("etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubenode="+peer,
		"--logger=zap", "--log-outputs=stderr", "--log-level=warn")
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	return p.waitReady(etcdReady, func() error { return kubeapi.HTTPOK(hc, client+"/health", "") })
}

// startAPIServer starts the apiserver on the bridge address, where pods
// reach it through the kubernetes Service (kube-proxy), with the
// admission plugins and authorizers of a real cluster.
func (n *Node) startAPIServer() error {
	p, err := n.start("kube-apiserver", n.bins.apiserver,
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--bind-address="+hostIP, "--advertise-address="+hostIP,
		"--secure-port="+strconv.Itoa(apiserverPort),
		// A self-signed certificate for the advertised address and the
		// kubernetes Service's; pods trust it through kube-root-ca.crt.
		"--cert-dir="+n.path("certs"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc."+clusterDomain,
		"--service-account-key-file="+n.path("sa.key"),
		"--service-account-signing-key-file="+n.path("sa.key"),
		"--token-auth-file="+n.path("tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// kubectl logs and exec reach kubelet at the node's address.
		"--kubelet-preferred-address-types=InternalIP",
		"--enable-priority-and-fairness=false",
		"--profiling=false")
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	base := fmt.Sprintf("https://%s:%d", hostIP, apiserverPort)
	return p.waitReady(apiserverReady, func() error {
		for _, path := range []string{"/readyz", "/api/v1/namespaces/default", "/api/v1/namespaces/kube-system"} {
			if err := kubeapi.HTTPOK(hc, base+path, n.token); err != nil {
				return err
			}
		}
		return nil
	})
}

// startComponents starts the controller-manager, the scheduler, kubelet
// and kube-proxy. The controller-manager runs without the node IPAM
// controller (the CNI configuration has the pod CIDR) and without node
// lifecycle (it would evict pods whenever a loaded machine delays
// kubelet's heartbeat); waitNode removes the not-ready taint instead.
func (n *Node) startComponents() error {
	if _, err := n.start("kube-controller-manager", n.bins.controllerManager,
		"--kubeconfig="+n.Kubeconfig,
		"--service-account-private-key-file="+n.path("sa.key"),
		"--root-ca-file="+n.path("certs/apiserver.crt"),
		"--controllers=*,-nodeipam,-nodelifecycle",
		"--cluster-cidr="+podCIDR,
		"--service-cluster-ip-range="+serviceCIDR,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false"); err != nil {
		return err
	}
	if _, err := n.start("kube-scheduler", n.bins.scheduler,
		"--kubeconfig="+n.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false"); err != nil {
		return err
	}
	if _, err := n.start("kubelet", n.bins.kubelet,
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.Kubeconfig,
		"--root-dir="+n.path("kubelet"),
		"--hostname-override="+nodeName,
		"--node-ip="+hostIP); err != nil {
		return err
	}
	_, err := n.start("kube-proxy", n.bins.kubeProxy,
		"--kubeconfig="+n.Kubeconfig,
		"--proxy-mode=iptables",
		"--cluster-cidr="+podCIDR,
		"--hostname-override="+nodeName,
		// Leave the host's conntrack sysctls as they are.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		// NodePorts on the node's address only: on localhost they would
		// need route_localnet set on the host.
		"--nodeport-addresses="+hostIP+"/32",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(proxyMetrics),
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(proxyHealthz))
	return err
}

// waitNode waits until the node is Ready, untaints it, and waits until
// kube-proxy has synced its rules and the default ServiceAccounts exist
// (the ServiceAccount admission plugin refuses pods before).
func (n *Node) waitNode() error {
	ctx := context.Background()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(nodeReadyTimeout)
	var last error
	for time.Now().Before(deadline) {
		if err := n.exitedComponent(); err != nil {
			return err
		}
		last = n.nodeUsable(ctx, hc)
		if last == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("kubenode: node %s not usable after %v: %v\nkubelet:\n%s\nkube-proxy:\n%s",
		nodeName, nodeReadyTimeout, last, n.Log("kubelet", logTailLines), n.Log("kube-proxy", logTailLines))
}

// nodeUsable checks one step of waitNode, doing what it can.
func (n *Node) nodeUsable(ctx context.Context, hc *http.Client) error {
	node, err := n.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !nodeReady(node) {
		return fmt.Errorf("node %s is not Ready: %v", nodeName, node.Status.Conditions)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady {
			return n.untaint(ctx, node)
		}
	}
	if err := kubeapi.HTTPOK(hc, "http://127.0.0.1:"+strconv.Itoa(proxyHealthz)+"/healthz", ""); err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}
	for _, ns := range []string{"default", "kube-system"} {
		if _, err := n.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// untaint removes the not-ready taint kubelet registered the node with,
// which the node lifecycle controller would remove once it is Ready. A
// conflict (kubelet updated the node) is retried by the caller.
func (n *Node) untaint(ctx context.Context, node *corev1.Node) error {
	var keep []corev1.Taint
	for _, taint := range node.Spec.Taints {
		if taint.Key != corev1.TaintNodeNotReady {
			keep = append(keep, taint)
		}
	}
	node.Spec.Taints = keep
	_, err := n.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	if err == nil || apierrors.IsConflict(err) {
		return errors.New("removing the not-ready taint")
	}
	return err
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
