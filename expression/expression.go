// Package expression compiles and evaluates the boolean expressions of
// CoreDNS's view plugin, with the functions CoreDNS gives them (name(), type(), client_ip(), incidr(), …),
// in the expr-lang language. An expression is compiled once, when the
// configuration is loaded; evaluating it allocates only what its own
// functions return.
package expression

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/miekg/dns"
)

// Request is what an expression can ask about a query.
type Request struct {
	Name    string // the question name, lower case, fully qualified
	Type    uint16 // the question type
	Class   uint16 // the question class
	ID      uint16
	Opcode  int
	Do      bool   // the EDNS0 DNSSEC OK bit
	UDPSize uint16 // the EDNS0 buffer size; 0 without EDNS0
	Size    int    // the request's length in bytes
	TCP     bool   // over a stream (TCP, TLS, HTTPS) rather than UDP
	Client  netip.AddrPort
	Server  netip.AddrPort // the listener's address the request came to
}

// BufSize is the buffer size CoreDNS's bufsize() reports: 65535 over a
// stream, otherwise the EDNS0 size, at least 512.
func (r *Request) BufSize() int {
	if r.TCP {
		return dns.MaxMsgSize
	}
	return max(int(r.UDPSize), dns.MinMsgSize)
}

// env is what expressions see: CoreDNS's function names, bound to the
// request held in req. Every env is built once with its functions and
// reused from a pool, so an evaluation does not build closures.
type env struct {
	Incidr     func(ip, cidr string) (bool, error) `expr:"incidr"`
	Metadata   func(label string) string           `expr:"metadata"`
	Type       func() string                       `expr:"type"`
	Name       func() string                       `expr:"name"`
	Class      func() string                       `expr:"class"`
	Proto      func() string                       `expr:"proto"`
	Size       func() int                          `expr:"size"`
	ClientIP   func() string                       `expr:"client_ip"`
	Port       func() string                       `expr:"port"`
	ID         func() int                          `expr:"id"`
	Opcode     func() int                          `expr:"opcode"`
	Do         func() bool                         `expr:"do"`
	BufSize    func() int                          `expr:"bufsize"`
	ServerIP   func() string                       `expr:"server_ip"`
	ServerPort func() string                       `expr:"server_port"`
	req        *Request
	vm         vm.VM
}

func newEnv() *env {
	e := &env{}
	e.Incidr = incidr
	e.Metadata = func(string) string { return "" } // shardns has no metadata plugin
	e.Type = func() string { return dns.Type(e.req.Type).String() }
	e.Name = func() string { return e.req.Name }
	e.Class = func() string { return dns.Class(e.req.Class).String() }
	e.Proto = func() string {
		if e.req.TCP {
			return "tcp"
		}
		return "udp"
	}
	e.Size = func() int { return e.req.Size }
	e.ClientIP = func() string { return addr(e.req.Client) }
	e.Port = func() string { return port(e.req.Client) }
	e.ID = func() int { return int(e.req.ID) }
	e.Opcode = func() int { return e.req.Opcode }
	e.Do = func() bool { return e.req.Do }
	e.BufSize = func() int { return e.req.BufSize() }
	e.ServerIP = func() string { return addr(e.req.Server) }
	e.ServerPort = func() string { return port(e.req.Server) }
	return e
}

var envs = sync.Pool{New: func() any { return newEnv() }}

// incidr reports whether ip is in cidr; either not parsing is an error,
// which makes the expression false, as in CoreDNS.
func incidr(ip, cidr string) (bool, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false, fmt.Errorf("incidr: %q is not an IP address", ip)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false, fmt.Errorf("incidr: %w", err)
	}
	return p.Contains(a.Unmap()) || p.Contains(a), nil
}

// addr is an address as CoreDNS writes it to expressions: an IPv4 client
// of a dual-stack socket as IPv4, an IPv6 one without brackets.
func addr(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.Addr().Unmap().String()
}

func port(a netip.AddrPort) string {
	if !a.IsValid() {
		return "0"
	}
	return strconv.Itoa(int(a.Port()))
}

// Condition is a compiled expression that holds or not.
type Condition struct {
	src  string
	prog *vm.Program
}

// Compile compiles src, which must give a boolean.
func Compile(src string) (*Condition, error) {
	prog, err := expr.Compile(src, expr.Env(newEnv()), expr.AsBool(), expr.DisableBuiltin("type"))
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", src, err)
	}
	return &Condition{src: src, prog: prog}, nil
}

// String is the expression as written.
func (c *Condition) String() string { return c.src }

// All reports whether every condition holds for r. An expression that
// fails while it runs (incidr on something that is no address) does not
// hold, as in CoreDNS.
func All(conds []*Condition, r *Request) bool {
	e := envs.Get().(*env)
	e.req = r
	ok := true
	for _, c := range conds {
		out, err := e.vm.Run(c.prog, e)
		if b, isBool := out.(bool); err != nil || !isBool || !b {
			ok = false
			break
		}
	}
	e.req = nil
	envs.Put(e)
	return ok
}
