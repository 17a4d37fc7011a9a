package gateway

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/sources/kubeclient"
)

// servedVersions is an API server's discovery: resources by group version.
type servedVersions map[string][]string

func (s servedVersions) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	rs, ok := s[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
	}
	return list, nil
}

// The newest version served is read: TLSRoute at v1 where the standard
// channel serves it, at v1alpha2 on clusters with older CRDs; a kind not
// served at all is kubeclient's ErrNotServed.
func TestPick(t *testing.T) {
	tls := watchedKinds([]string{KindTLSRoute})[0]
	for _, c := range []struct {
		name   string
		server servedVersions
		want   string
	}{
		{"v1", servedVersions{"gateway.networking.k8s.io/v1": {"tlsroutes", "gateways"}, "gateway.networking.k8s.io/v1alpha2": {"tlsroutes"}}, "v1"},
		{"older CRDs", servedVersions{"gateway.networking.k8s.io/v1": {"gateways"}, "gateway.networking.k8s.io/v1alpha2": {"tlsroutes"}}, "v1alpha2"},
	} {
		gvr, err := pick(c.server, tls)
		if err != nil || gvr.Version != c.want || gvr.Resource != "tlsroutes" {
			t.Errorf("%s: %v %v, want tlsroutes %s", c.name, gvr, err, c.want)
		}
	}
	if _, err := pick(servedVersions{"gateway.networking.k8s.io/v1": {"gateways"}}, tls); !errors.Is(err, kubeclient.ErrNotServed) {
		t.Errorf("not served: %v, want ErrNotServed", err)
	}
	if _, err := pick(failing{}, tls); err == nil || errors.Is(err, kubeclient.ErrNotServed) {
		t.Errorf("unreachable API server: %v, want an error to retry", err)
	}
}

type failing struct{}

func (failing) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, errors.New("connection refused")
}
