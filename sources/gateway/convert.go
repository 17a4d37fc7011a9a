package gateway

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Objects are converted at the informer's edge (its transform): the cache
// holds an item per object with the slim form only. The Gateway API
// kinds are read into the v1 types whatever version is served: the
// fields read (hostnames, parentRefs, status.addresses) are the same in
// v1alpha2, v1beta1 and v1.

// item is what the informers' caches hold: the object's identity and its
// slim form (*Gateway, *Route, *Ingress or *Service).
type item struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	slim any
}

// DeepCopyObject makes item a runtime.Object; items are never changed
// once made, so a copy may share the slim form.
func (i *item) DeepCopyObject() runtime.Object { c := *i; return &c }

// convertFunc makes the slim form of one served object.
type convertFunc func(u *unstructured.Unstructured) (any, error)

// transform returns the informer transform that turns each object into
// an item with convert; an object that does not convert becomes an item
// with nothing to answer, after report is told why.
func transform(convert convertFunc, report func(u *unstructured.Unstructured, err error)) func(any) (any, error) {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // tombstones pass through
		}
		slim, err := convert(u)
		if err != nil {
			report(u, err)
			slim = nil
		}
		return &item{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(),
			ResourceVersion: u.GetResourceVersion()}, slim: slim}, nil
	}
}

// convertGateway reads a Gateway's addresses.
func convertGateway(u *unstructured.Unstructured) (any, error) {
	var g gatewayv1.Gateway
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &g); err != nil {
		return nil, err
	}
	out := &Gateway{Namespace: g.Namespace, Name: g.Name}
	for _, a := range g.Status.Addresses {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			continue
		}
		if ip, err := netip.ParseAddr(a.Value); err == nil {
			out.Addrs = append(out.Addrs, ip.Unmap())
		}
	}
	return out, nil
}

// routeSpec is what the three route kinds share.
type routeSpec struct {
	Spec struct {
		Hostnames  []gatewayv1.Hostname        `json:"hostnames"`
		ParentRefs []gatewayv1.ParentReference `json:"parentRefs"`
	} `json:"spec"`
}

// convertRoute returns the converter of routes of kind.
func convertRoute(kind string) convertFunc {
	return func(u *unstructured.Unstructured) (any, error) {
		var r routeSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			return nil, err
		}
		return routeOf(kind, u.GetNamespace(), u.GetName(), r.Spec.Hostnames, r.Spec.ParentRefs), nil
	}
}

// routeOf keeps the hostnames of a route and the Gateways among its
// parents: a parentRef without group and kind is a Gateway; one of the
// route's namespace unless it names another.
func routeOf(kind, namespace, name string, hostnames []gatewayv1.Hostname, parents []gatewayv1.ParentReference) *Route {
	out := &Route{Kind: kind, Namespace: namespace, Name: name}
	for _, h := range hostnames {
		out.Hostnames = append(out.Hostnames, strings.ToLower(string(h)))
	}
	for _, p := range parents {
		if p.Group != nil && *p.Group != gatewayv1.GroupName || p.Kind != nil && *p.Kind != "Gateway" {
			continue
		}
		ns := namespace
		if p.Namespace != nil && *p.Namespace != "" {
			ns = string(*p.Namespace)
		}
		out.Parents = append(out.Parents, Gateway{Namespace: ns, Name: string(p.Name)})
	}
	return out
}

// convertIngress reads an Ingress's hosts and load balancer addresses.
func convertIngress(u *unstructured.Unstructured) (any, error) {
	var in networkingv1.Ingress
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &in); err != nil {
		return nil, err
	}
	out := &Ingress{Namespace: in.Namespace, Name: in.Name}
	for _, r := range in.Spec.Rules {
		if r.Host != "" {
			out.Hosts = append(out.Hosts, strings.ToLower(r.Host))
		}
	}
	for _, lb := range in.Status.LoadBalancer.Ingress {
		out.Addrs = appendIP(out.Addrs, lb.IP)
	}
	return out, nil
}

// convertService reads a Service of type LoadBalancer; any other type
// has no name in the zone (nil).
func convertService(u *unstructured.Unstructured) (any, error) {
	var svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
		return nil, err
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, nil
	}
	out := &Service{Namespace: svc.Namespace, Name: svc.Name, Hostname: hostnameAnnotation(svc.Annotations)}
	// External IPs, when set, are the addresses; the status is not read.
	for _, ip := range svc.Spec.ExternalIPs {
		out.Addrs = appendIP(out.Addrs, ip)
	}
	if len(svc.Spec.ExternalIPs) == 0 {
		for _, lb := range svc.Status.LoadBalancer.Ingress {
			out.Addrs = appendIP(out.Addrs, lb.IP)
		}
	}
	return out, nil
}

// appendIP appends s to addrs when it is an IP address.
func appendIP(addrs []netip.Addr, s string) []netip.Addr {
	if ip, err := netip.ParseAddr(s); err == nil {
		return append(addrs, ip.Unmap())
	}
	return addrs
}

// errNotSlim: a cache held something other than an item.
var errNotSlim = fmt.Errorf("not a converted object")

// collect sorts the slim forms of a cache's items into objs.
func collect(objs *Objects, items []any) error {
	for _, obj := range items {
		it, ok := obj.(*item)
		if !ok {
			return errNotSlim
		}
		switch s := it.slim.(type) {
		case *Gateway:
			objs.Gateways = append(objs.Gateways, *s)
		case *Route:
			objs.Routes = append(objs.Routes, *s)
		case *Ingress:
			objs.Ingress = append(objs.Ingress, *s)
		case *Service:
			objs.Services = append(objs.Services, *s)
		}
	}
	return nil
}
