package kubeclient

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodePod(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "web", Name: "p"}
	cases := []struct {
		name string
		pod  corev1.Pod
		ips  []string
		host bool
		done bool
	}{
		{name: "no address yet", pod: corev1.Pod{ObjectMeta: meta}},
		{name: "podIP only", pod: corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{PodIP: "10.244.1.5"}},
			ips: []string{"10.244.1.5"}},
		{name: "dual stack", pod: corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{PodIP: "10.244.1.5",
			PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00::5"}}}}, ips: []string{"10.244.1.5", "fd00::5"}},
		{name: "a bad address is left out, not the pod", pod: corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{
			PodIPs: []corev1.PodIP{{IP: "not-an-ip"}, {IP: "fe80::1%eth0"}, {IP: "::ffff:10.244.1.6"}}}},
			ips: []string{"10.244.1.6"}},
		{name: "host network", pod: corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{HostNetwork: true},
			Status: corev1.PodStatus{PodIP: "192.168.0.1"}}, ips: []string{"192.168.0.1"}, host: true},
		{name: "finished", pod: corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{Phase: corev1.PodSucceeded,
			PodIP: "10.244.1.7"}}, ips: []string{"10.244.1.7"}, done: true},
		{name: "failed", pod: corev1.Pod{ObjectMeta: meta, Status: corev1.PodStatus{Phase: corev1.PodFailed}}, done: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NodePod(&tc.pod)
			var want []netip.Addr
			for _, s := range tc.ips {
				want = append(want, netip.MustParseAddr(s))
			}
			if got.Namespace != "web" || got.Name != "p" || got.HostNetwork != tc.host || got.Done != tc.done ||
				!slices.Equal(got.IPs, want) {
				t.Errorf("got %+v, want IPs %v host %v done %v", got, want, tc.host, tc.done)
			}
		})
	}
}
