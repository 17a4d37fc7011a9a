package corefile

import (
	"strconv"
	"strings"
	"time"

	"github.com/shardns/shardns/config"
)

// The plugins here change requests, responses and connections rather
// than answer: bufsize, nsid, header, dns64 and timeouts. Each reads its
// options as CoreDNS 1.15 does, and what CoreDNS refuses to start on is
// reported at its line, so serving the Corefile stops there too.

// defaultBufSize is CoreDNS's bufsize without a size (DNS flag day 2020).
const defaultBufSize = 1232

func (c *converter) bufsizePlugin(s *server, d *Directive) {
	if !c.claim("bufsize", d, "EDNS0 buffer size") {
		return
	}
	c.options(d, func(*Directive) bool { return false })
	size := defaultBufSize
	switch len(d.Args) {
	case 0:
	case 1:
		n, err := strconv.Atoi(d.Args[0])
		if err != nil || n < 512 || n > 4096 {
			c.unmapped(d.place(), "bufsize %s: the size must be a number from 512 to 4096", d.Args[0])
			return
		}
		size = n
	default:
		c.unmapped(d.place(), "bufsize %s: takes one size", strings.Join(d.Args, " "))
		return
	}
	c.cfg.BufSize = config.BufSizeConfig{Enabled: true, Size: size}
	c.global(s, d, "bufsize")
}

func (c *converter) nsidPlugin(s *server, d *Directive) {
	if !c.claim("nsid", d, "NSID") {
		return
	}
	c.options(d, func(*Directive) bool { return false })
	data := strings.Join(d.Args, " ")
	if len(data) > config.MaxNSIDLength {
		c.unmapped(d.place(), "nsid: the data is %d bytes, shardns sends at most %d", len(data), config.MaxNSIDLength)
		return
	}
	// No data: the hostname, read where the configuration is served.
	c.cfg.NSID = config.NSIDConfig{Enabled: true, Data: data}
	c.global(s, d, "nsid")
}

// headerPlugin maps "header { query|response set|clear FLAGS... }".
func (c *converter) headerPlugin(s *server, d *Directive) {
	if !c.claim("header", d, "set of header rules") {
		return
	}
	if len(d.Args) > 0 {
		c.unmapped(d.place(), "header %s: the rules go in its block", strings.Join(d.Args, " "))
		return
	}
	var h config.HeaderConfig
	ok := true
	for _, o := range d.Block {
		rule, err := headerRule(o)
		if err != "" {
			c.unmapped(o.place(), "header %s: %s", strings.Join(append([]string{o.Name}, o.Args...), " "), err)
			ok = false
			continue
		}
		if strings.ToLower(o.Name) == "query" {
			h.Query = append(h.Query, rule)
		} else {
			h.Response = append(h.Response, rule)
		}
	}
	if !ok {
		return
	}
	if len(h.Query)+len(h.Response) == 0 {
		c.unmapped(d.place(), "header needs at least one rule in its block")
		return
	}
	c.cfg.Header = h
	c.global(s, d, "header")
}

// headerRule reads one line of a header block; the error is what
// CoreDNS refuses in it.
func headerRule(o *Directive) (config.HeaderRule, string) {
	selector := strings.ToLower(o.Name)
	if selector != "query" && selector != "response" {
		return config.HeaderRule{}, "the selector must be query or response"
	}
	if len(o.Args) == 0 {
		return config.HeaderRule{}, "needs set or clear"
	}
	action := strings.ToLower(o.Args[0])
	if action != "set" && action != "clear" {
		return config.HeaderRule{}, "the action must be set or clear"
	}
	if len(o.Args) < 2 {
		return config.HeaderRule{}, "needs at least one flag"
	}
	rule := config.HeaderRule{Action: action}
	for _, f := range o.Args[1:] {
		if !config.IsHeaderFlag(f) {
			return config.HeaderRule{}, "flag " + f + " is not aa, ra or rd (the flags CoreDNS's header changes)"
		}
		rule.Flags = append(rule.Flags, strings.ToLower(f))
	}
	return rule, ""
}

// dns64Plugin maps "dns64 [PREFIX] { prefix P; translate_all; allow_ipv4 }".
func (c *converter) dns64Plugin(s *server, d *Directive) {
	if !c.claim("dns64", d, "DNS64") {
		return
	}
	d64 := config.DNS64Config{Enabled: true, Prefix: config.DefaultDNS64Prefix}
	ok := true
	prefix := func(at *Directive, p string) {
		if err := config.CheckDNS64Prefix(p); err != nil {
			c.unmapped(at.place(), "dns64 prefix %v", err)
			ok = false
		}
		d64.Prefix = p
	}
	switch len(d.Args) {
	case 0:
	case 1:
		prefix(d, d.Args[0])
	default:
		c.unmapped(d.place(), "dns64 %s: takes one prefix", strings.Join(d.Args, " "))
		return
	}
	c.options(d, func(o *Directive) bool {
		switch {
		case o.Name == "prefix" && len(o.Args) == 1:
			prefix(o, o.Args[0])
		case o.Name == "translate_all" && len(o.Args) == 0:
			d64.TranslateAll = true
		case o.Name == "allow_ipv4" && len(o.Args) == 0:
			d64.AllowIPv4 = true
		default:
			ok = false
			return false
		}
		return true
	})
	if ok {
		c.cfg.DNS64 = d64
		c.global(s, d, "dns64")
	}
}

// timeoutsPlugin maps "timeouts { read D; write D; idle D; maxtcpqueries N }"
// to the dns.tcp* bounds, which every TCP, DNS over TLS and HTTPS
// listener of shardns shares.
func (c *converter) timeoutsPlugin(s *server, d *Directive) {
	if !c.claim("timeouts", d, "set of TCP timeouts") {
		return
	}
	if len(d.Args) > 0 || len(d.Block) == 0 {
		c.unmapped(d.place(), "timeouts needs a block of read, write, idle or maxtcpqueries and nothing else")
		return
	}
	dnsCfg := c.cfg.DNS
	ok := true
	c.options(d, func(o *Directive) bool {
		if len(o.Args) != 1 {
			ok = false
			return false
		}
		if o.Name == "maxtcpqueries" {
			n, err := strconv.Atoi(o.Args[0])
			if err != nil || n == 0 || n < -1 {
				c.unmapped(o.place(), "timeouts maxtcpqueries %s: must be -1 (no bound) or a positive number", o.Args[0])
				ok = false
				return true
			}
			dnsCfg.TCPMaxQueries = max(n, 0)
			return true
		}
		var field *config.Duration
		switch o.Name {
		case "read":
			field = &dnsCfg.TCPReadTimeout
		case "write":
			field = &dnsCfg.TCPWriteTimeout
		case "idle":
			field = &dnsCfg.TCPIdleTimeout
		default:
			ok = false
			return false
		}
		dur, err := timeoutDuration(o.Args[0])
		if err != "" {
			c.unmapped(o.place(), "timeouts %s %s: %s", o.Name, o.Args[0], err)
			ok = false
			return true
		}
		*field = config.Duration(dur)
		return true
	})
	if ok {
		c.cfg.DNS = dnsCfg
		c.global(s, d, "dns.tcpReadTimeout, tcpWriteTimeout, tcpIdleTimeout, tcpMaxQueries")
	}
}

// timeoutDuration reads a timeout as CoreDNS does: a Go duration, or a
// number of seconds, from 1s to 24h.
func timeoutDuration(arg string) (time.Duration, string) {
	if _, err := strconv.Atoi(arg); err == nil {
		arg += "s"
	}
	d, err := time.ParseDuration(arg)
	if err != nil {
		return 0, "not a duration"
	}
	if d < time.Second || d > 24*time.Hour {
		return 0, "must be between 1s and 24h"
	}
	return d, ""
}
