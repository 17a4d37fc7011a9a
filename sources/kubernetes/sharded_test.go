package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/cluster"
)

// A few namespaces added each get a range of their own hash alone, in
// order; many get the runs among every namespace, which hold each of
// them and no namespace not added.
func TestAddedRanges(t *testing.T) {
	var all []string
	for i := range 100 {
		all = append(all, fmt.Sprintf("team-%03d", i))
	}
	in := func(ranges []cluster.HashRange, ns string) bool {
		h := cluster.NamespaceHash(ns)
		for _, r := range ranges {
			if h >= r.Start && h <= r.End {
				return true
			}
		}
		return false
	}
	for _, n := range []int{1, 3, maxPointRanges, maxPointRanges + 1, 40} {
		added := all[:n]
		ranges := watchRanges(all, added)
		for i, ns := range all {
			if in(ranges, ns) != (i < n) {
				t.Fatalf("%d added: %s in the ranges: %v", n, ns, in(ranges, ns))
			}
		}
		for i := 1; i < len(ranges); i++ {
			if ranges[i].Start <= ranges[i-1].End {
				t.Fatalf("%d added: ranges out of order: %v", n, ranges)
			}
		}
		if n <= maxPointRanges && len(ranges) != n {
			t.Fatalf("%d added: %d ranges, want one each", n, len(ranges))
		}
	}
}

// A /readyz the API server refuses to this replica (4xx) is its word that
// it serves; a 5xx (not ready), a refused connection or no answer is not.
func TestReadyzAnswers(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(schema.GroupResource{}, "/readyz", errors.New("no")), true},
		{apierrors.NewUnauthorized("no"), true},
		{apierrors.NewInternalError(errors.New("etcd")), false},
		{apierrors.NewServiceUnavailable("not ready"), false},
		{errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := answers(tc.err); got != tc.want {
			t.Errorf("answers(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
