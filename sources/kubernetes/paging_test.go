package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/cluster"
)

// pagingServer serves a list of services as an apiserver does: whole when
// no limit is asked, or when any version is (resourceVersion "0", which
// the watch cache serves whole whatever the limit), else in pages with
// continue tokens. expire makes the continuation of that page expire
// once.
type pagingServer struct {
	mu     sync.Mutex
	items  []corev1.Service
	asked  []metav1.ListOptions
	expire string
}

func newPagingServer(n int) *pagingServer {
	s := &pagingServer{}
	for i := range n {
		s.items = append(s.items, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%7),
			Name: fmt.Sprintf("svc%d", i), ResourceVersion: strconv.Itoa(100 + i)},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}})
	}
	return s
}

func (s *pagingServer) list(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, o)
	if o.Continue != "" && o.Continue == s.expire {
		s.expire = ""
		return nil, apierrors.NewResourceExpired("the continue token expired")
	}
	from := 0
	if o.Continue != "" {
		from, _ = strconv.Atoi(o.Continue)
	}
	to := len(s.items)
	if o.Limit > 0 && o.ResourceVersion != "0" {
		to = min(from+int(o.Limit), to)
	}
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "9999"}}
	list.Items = append(list.Items, s.items[from:to]...)
	if to < len(s.items) {
		list.Continue = strconv.Itoa(to)
	}
	return list, nil
}

func (s *pagingServer) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: s.list,
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				return nil, errors.New("this server does not stream lists") // the reflector lists
			}
			return watch.NewFake(), nil
		},
	}
}

func (s *pagingServer) requests() []metav1.ListOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metav1.ListOptions(nil), s.asked...)
}

// A list asked for whole is asked for in pages, the version only on the
// first, and comes back whole as the entries the transform makes.
func TestPagedListsAskPagesAndConvertEach(t *testing.T) {
	server := newPagingServer(2*listPageSize + 3)
	pages := &pageTransform{}
	pages.set(transformFor(func(string) bool { return true }, nil, nil))
	got, err := pagedLists(server.listWatch(), pages).ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "500"})
	if err != nil {
		t.Fatal(err)
	}
	asked := server.requests()
	if len(asked) != 3 {
		t.Fatalf("%d requests, want 3 pages", len(asked))
	}
	for i, o := range asked {
		var wantVersion string
		var wantMatch metav1.ResourceVersionMatch
		if i == 0 { // as new as 500 at least, as an unpaged list at 500 asks
			wantVersion, wantMatch = "500", metav1.ResourceVersionMatchNotOlderThan
		}
		if o.Limit != listPageSize || o.ResourceVersion != wantVersion || o.ResourceVersionMatch != wantMatch {
			t.Errorf("page %d asked with limit %d, version %q (%q); want %d, %q (%q)", i, o.Limit, o.ResourceVersion,
				o.ResourceVersionMatch, listPageSize, wantVersion, wantMatch)
		}
	}
	list := entriesOf(t, got)
	if len(list) != len(server.items) {
		t.Fatalf("%d entries, want %d", len(list), len(server.items))
	}
	for i, c := range list {
		if want := server.items[i].Namespace + "/" + server.items[i].Name; c.key != want || c.frozen == "" {
			t.Fatalf("entry %d is %q (frozen %d bytes), want %q with its records", i, c.key, len(c.frozen), want)
		}
	}
}

// The reflector's first list asks for any version with a limit, which
// the watch cache serves whole: it is asked for a version at least as new
// as the first, which the cache serves in pages, sharded or not.
func TestPagedListsAskTheFirstListInPages(t *testing.T) {
	for _, shards := range []string{"", cluster.ShardSelector(cluster.NamespaceField, []cluster.HashRange{{Start: 0, End: 1 << 63}})} {
		server := newPagingServer(2*listPageSize + 3)
		pages := &pageTransform{}
		pages.set(transformFor(func(string) bool { return true }, nil, nil))
		got, err := pagedLists(server.listWatch(), pages).ListWithContext(context.Background(),
			metav1.ListOptions{ResourceVersion: "0", Limit: 500, ShardSelector: shards})
		if err != nil {
			t.Fatal(err)
		}
		asked := server.requests()
		if len(asked) != 3 {
			t.Fatalf("shards %q: requests %+v, want 3 pages", shards, asked)
		}
		for i, o := range asked {
			wantVersion, wantMatch := "1", metav1.ResourceVersionMatchNotOlderThan
			if i > 0 { // a continuation carries the first page's version
				wantVersion, wantMatch = "", ""
			}
			if o.Limit != listPageSize || o.ResourceVersion != wantVersion || o.ResourceVersionMatch != wantMatch ||
				(i > 0) != (o.Continue != "") || o.ShardSelector != shards {
				t.Errorf("page %d asked %+v, want limit %d at version %q (%q), shards %q", i, o, listPageSize, wantVersion, wantMatch, shards)
			}
		}
		if entries := entriesOf(t, got); len(entries) != len(server.items) || got.(*metainternalList).Continue != "" {
			t.Fatalf("%d entries, continue %q; want all %d and no token", len(entries), got.(*metainternalList).Continue, len(server.items))
		}
	}
}

// A caller that pages itself gets the page it asked for, converted, with
// its continue token; a continuation that expired falls back to one whole
// request at the version first asked for.
func TestPagedListsKeepTheCallersPagesAndRecoverExpiry(t *testing.T) {
	server := newPagingServer(listPageSize + 10)
	pages := &pageTransform{}
	pages.set(transformFor(func(string) bool { return true }, nil, nil))
	lw := pagedLists(server.listWatch(), pages)
	got, err := lw.ListWithContext(context.Background(), metav1.ListOptions{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if entries := entriesOf(t, got); len(entries) != 4 || got.(*metainternalList).Continue != "4" {
		t.Fatalf("%d entries, continue %q: want the 4 asked for and the token of the rest", len(entries), got.(*metainternalList).Continue)
	}

	server.expire = strconv.Itoa(listPageSize)
	server.asked = nil
	got, err = lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "700"})
	if err != nil {
		t.Fatal(err)
	}
	asked := server.requests()
	if len(asked) != 3 || asked[2].Limit != 0 || asked[2].ResourceVersion != "700" || asked[2].ResourceVersionMatch != "" || asked[2].Continue != "" {
		t.Fatalf("requests %+v: want a page, an expired continuation, then the whole list at version 700", asked)
	}
	if entries := entriesOf(t, got); len(entries) != len(server.items) {
		t.Fatalf("%d entries after the fallback, want %d", len(entries), len(server.items))
	}
}

// A real informer over paged lists holds every object as an entry, and
// its handler sees each once.
func TestInformerOverPagedLists(t *testing.T) {
	server := newPagingServer(listPageSize + 1)
	pages := &pageTransform{}
	informer := cache.NewSharedIndexInformer(pagedLists(server.listWatch(), pages), &corev1.Service{}, 0, cache.Indexers{})
	transform := transformFor(func(string) bool { return true }, &heldEntries{own: informer.GetStore()}, nil)
	if err := informer.SetTransform(transform); err != nil {
		t.Fatal(err)
	}
	pages.set(transform)
	var mu sync.Mutex
	added := map[string]int{}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		added[obj.(*cached).key]++
	}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go informer.Run(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	if n := len(informer.GetStore().List()); n != len(server.items) {
		t.Fatalf("the store holds %d objects, want %d", n, len(server.items))
	}
	for _, obj := range informer.GetStore().List() {
		if _, ok := obj.(*cached); !ok {
			t.Fatalf("the store holds a %T, want entries", obj)
		}
	}
	if asked := server.requests(); len(asked) != 2 || asked[0].ResourceVersion == "0" {
		t.Fatalf("list requests %+v, want 2 pages of the newest version", asked)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, svc := range server.items {
		if key := svc.Namespace + "/" + svc.Name; added[key] != 1 {
			t.Fatalf("%s added %d times, want once", key, added[key])
		}
	}
}

// metainternalList is what pagedLists returns.
type metainternalList = metainternalversion.List

// entriesOf returns the entries of a list pagedLists returned.
func entriesOf(t *testing.T, obj runtime.Object) []*cached {
	t.Helper()
	list, ok := obj.(*metainternalList)
	if !ok {
		t.Fatalf("a %T, want a list of entries", obj)
	}
	var out []*cached
	for _, item := range list.Items {
		c, ok := item.(*cached)
		if !ok || c.GetObjectKind() != schema.EmptyObjectKind {
			t.Fatalf("an item %T, want an entry", item)
		}
		out = append(out, c)
	}
	return out
}
