package kubernetes

import (
	"context"
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// A list that the apiserver does not stream (a server without WatchList,
// a client without it, or a relist right after the apiserver restarted,
// while its watch cache is not ready and streaming requests are
// refused) comes back whole: the reflector asks for it in one request
// (or, at start, for any version, which the watch cache serves whole
// whatever the limit) and keeps every decoded object of the kind until
// its store has replaced them all. In a cluster of 20k services that is
// every EndpointSlice decoded at once, on every replica at once, at
// start and at the moment the apiserver comes back: the peak that
// OOM-kills cluster DNS servers. So a list the reflector asks for whole
// is asked for a page at a time here, and each page is converted to the
// entries the store keeps (the informer's own transform) as it arrives:
// a relist holds one page of decoded objects and the entries, most of
// them the very ones the store holds already (heldEntries).

// listPageSize is the objects asked for per page: client-go's pager's
// default, a few hundred kilobytes of EndpointSlices.
const listPageSize = 500

// pageTransform is an informer's transform, applied to list pages. The
// informer is made before its transform (which reads the informer's
// store), so the transform is set later; until it is, pages pass as they
// are.
type pageTransform struct {
	fn atomic.Pointer[cache.TransformFunc]
}

func (p *pageTransform) set(fn cache.TransformFunc) { p.fn.Store(&fn) }

// pagedLists wraps lw's lists: a list asked for whole is asked for in
// pages, and every page is converted by pages's transform. A nil pages
// leaves lw as it is.
func pagedLists(lw *cache.ListWatch, pages *pageTransform) *cache.ListWatch {
	if pages == nil {
		return lw
	}
	return &cache.ListWatch{
		DisableChunking:      lw.DisableChunking,
		WatchFuncWithContext: lw.WatchFuncWithContext,
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if o.ResourceVersion == "0" && o.ResourceVersionMatch == "" && o.Continue == "" && !lw.DisableChunking {
				// The reflector's first list: any version, with a
				// limit. The watch cache serves "any version" whole
				// whatever the limit (the reflector keeps the limit for
				// servers without one), so each replica would decode
				// every object of its share at once at start. A version
				// at least as new as the first is any version too, and
				// the watch cache serves it in pages where it keeps
				// snapshots (1.34+: 100k EndpointSlices in 200 pages
				// in 5.7 s, against 4.8 s whole); an older apiserver
				// serves it from etcd a page at a time, as kubectl's
				// lists.
				o.ResourceVersion, o.Limit = "1", 0
				return pages.listWhole(ctx, lw, o)
			}
			if o.Limit != 0 || o.Continue != "" || lw.DisableChunking {
				// The caller pages, or the server cannot.
				page, err := lw.ListWithContext(ctx, o)
				if err != nil {
					return nil, err
				}
				return pages.apply(page, nil)
			}
			return pages.listWhole(ctx, lw, o)
		},
	}
}

// listWhole lists what o asks for a page at a time and returns it as one
// list of entries. A continuation that expired (the list took longer than
// the apiserver keeps its history) falls back to one whole request at the
// version asked for, as client-go's pager does.
func (p *pageTransform) listWhole(ctx context.Context, lw *cache.ListWatch, o metav1.ListOptions) (runtime.Object, error) {
	asked := o
	o.Limit = listPageSize
	if v := o.ResourceVersion; v != "" && v != "0" && o.ResourceVersionMatch == "" {
		// A version with a limit asks for the state at exactly that
		// version, without one for a state at least as new: the reflector
		// means the latter (it relists at the version it last saw).
		o.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	var whole *metainternalversion.List
	for {
		page, err := lw.ListWithContext(ctx, o)
		if err != nil {
			if o.Continue != "" && apierrors.IsResourceExpired(err) {
				page, err := lw.ListWithContext(ctx, asked)
				if err != nil {
					return nil, err
				}
				return p.apply(page, nil)
			}
			return nil, err
		}
		next, err := meta.ListAccessor(page)
		if err != nil {
			return nil, fmt.Errorf("a list page is not a list: %w", err)
		}
		cont := next.GetContinue()
		slim, err := p.apply(page, whole)
		if err != nil {
			return nil, err
		}
		whole = slim
		if cont == "" {
			whole.Continue, whole.RemainingItemCount = "", nil
			return whole, nil
		}
		o.Continue = cont
		// A continuation carries the version of the first page.
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
}

// apply appends the entries of page's objects to into (a new list, with
// page's list metadata, when into is nil) and returns it. Until the
// transform is set, the objects pass as they are.
func (p *pageTransform) apply(page runtime.Object, into *metainternalversion.List) (*metainternalversion.List, error) {
	fn := p.fn.Load()
	m, err := meta.ListAccessor(page)
	if err != nil {
		return nil, fmt.Errorf("a list page is not a list: %w", err)
	}
	if into == nil {
		into = &metainternalversion.List{ListMeta: metav1.ListMeta{ResourceVersion: m.GetResourceVersion(),
			Continue: m.GetContinue(), RemainingItemCount: m.GetRemainingItemCount()}}
	}
	err = meta.EachListItem(page, func(obj runtime.Object) error {
		if fn != nil {
			entry, err := (*fn)(obj)
			if err != nil {
				return err
			}
			if obj, _ = entry.(runtime.Object); obj == nil {
				return fmt.Errorf("the transform made a %T of a listed object", entry)
			}
		}
		into.Items = append(into.Items, obj)
		return nil
	})
	return into, err
}

// GetObjectKind and DeepCopyObject make an entry a runtime.Object, what a
// list hands the reflector. An entry never changes once made, so its
// copy is itself.
func (c *cached) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (c *cached) DeepCopyObject() runtime.Object { return c }
