package kubeclient

import (
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/shardns/shardns/config"
)

// Limits bound what a client asks of the API server, as CoreDNS's
// apiserver_qps, apiserver_burst and apiserver_max_inflight do. A zero
// field keeps client-go's default: 5 requests a second, a burst of 10,
// no bound on requests at once.
type Limits struct {
	QPS         float32
	Burst       int
	MaxInflight int
}

// Apply sets l on cfg. The rate limit is one token bucket shared by the
// REST clients built from cfg (client-go's clientset shares one too;
// each REST client would otherwise take a bucket of its own), and so is
// the bound on requests at once.
func (l Limits) Apply(cfg *rest.Config) {
	if l.QPS > 0 {
		cfg.QPS = l.QPS
	}
	if l.Burst > 0 {
		cfg.Burst = l.Burst
	}
	if l.QPS > 0 || l.Burst > 0 {
		qps, burst := cfg.QPS, cfg.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	if l.MaxInflight > 0 {
		sem := make(chan struct{}, l.MaxInflight)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return inflight{next: rt, sem: sem} })
	}
}

// inflight lets at most cap(sem) requests wait on the server at once. A
// request holds its place until RoundTrip returns, when the response
// headers have come: a watch's stream is read after that, so a watch
// holds a place only while it starts, as in CoreDNS.
type inflight struct {
	next http.RoundTripper
	sem  chan struct{}
}

func (t inflight) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
		return t.next.RoundTrip(r)
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// NewClientLimited is NewClientContext with l applied.
func NewClientLimited(kubeconfig, kubeContext, userAgent string, l Limits) (*Client, error) {
	cfg, err := RESTConfig(kubeconfig, kubeContext, userAgent)
	if err != nil {
		return nil, err
	}
	l.Apply(cfg)
	return NewClientForConfig(cfg)
}

// ForConfig connects to the API server of k (kubernetes.kubeconfig and
// kubernetes.context) with its request limits (kubernetes.apiserverQPS,
// apiserverBurst, apiserverMaxInflight).
func ForConfig(k config.KubernetesConfig, userAgent string) (*Client, error) {
	l := Limits{QPS: float32(k.APIServerQPS), Burst: k.APIServerBurst, MaxInflight: k.APIServerMaxInflight}
	return NewClientLimited(k.Kubeconfig, k.Context, userAgent, l)
}
