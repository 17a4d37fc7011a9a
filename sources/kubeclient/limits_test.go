package kubeclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// With apiserver_max_inflight 1, a second request, of the other API
// group's client too, waits while the first is unanswered: the server
// never sees two at once.
func TestLimitsMaxInflight(t *testing.T) {
	arrived, release := make(chan string, 4), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		if r.URL.Path == "/api/v1/namespaces" {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before Close, which waits for the held handler
	cfg := &rest.Config{Host: srv.URL}
	Limits{MaxInflight: 1}.Apply(cfg)
	c, err := NewClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- c.core.Get().Resource("namespaces").Do(context.Background()).Error() }()
	if p := <-arrived; p != "/api/v1/namespaces" {
		t.Fatalf("first request reached %s", p)
	}
	// The wait below is bounded by the request's own deadline: it ends
	// with the error when the bound holds, and reaches the server when not.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = c.discovery.Get().Resource("endpointslices").Do(ctx).Error()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second request while the first is unanswered: %v, want it held until its deadline", err)
	}
	if len(arrived) != 0 {
		t.Fatalf("the server saw %s while the first request was unanswered", <-arrived)
	}
	unblock()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := c.discovery.Get().Resource("endpointslices").Do(context.Background()).Error(); err != nil {
		t.Fatalf("after the first was answered: %v", err)
	}
}

// apiserver_qps and apiserver_burst make one token bucket for both API
// groups' clients; without them each keeps client-go's own.
func TestLimitsRate(t *testing.T) {
	cases := []struct {
		name   string
		l      Limits
		qps    float32
		shared bool
	}{
		{"qps and burst", Limits{QPS: 20, Burst: 40}, 20, true},
		{"burst alone keeps the default rate", Limits{Burst: 40}, rest.DefaultQPS, true},
		{"none", Limits{}, rest.DefaultQPS, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &rest.Config{Host: "https://api.example:6443"}
			tc.l.Apply(cfg)
			c, err := NewClientForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			core, disc := c.core.GetRateLimiter(), c.discovery.GetRateLimiter()
			if core.QPS() != tc.qps || disc.QPS() != tc.qps {
				t.Errorf("QPS %v and %v, want %v", core.QPS(), disc.QPS(), tc.qps)
			}
			if (core == disc) != tc.shared {
				t.Errorf("one bucket for both clients: %v, want %v", core == disc, tc.shared)
			}
		})
	}
}
