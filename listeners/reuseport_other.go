//go:build !linux

package listeners

import (
	"context"
	"errors"
	"net"
)

// errShared: steering a shared address needs Linux's reuseport programs.
var errShared = errors.New("sharing an address with another process needs Linux (SO_REUSEPORT with a steering program)")

const steerOldest, steerNext = 0, 1

func listenTCP(addr string, shared bool, _ uint32) (net.Listener, error) {
	if shared {
		return nil, errShared
	}
	lc := streamListenConfig()
	return lc.Listen(context.Background(), "tcp", addr)
}

// ListenShared needs Linux.
func ListenShared(string) (net.Listener, error) { return nil, errShared }

// Yield has nothing to steer here.
func (s *Sockets) Yield() error { return nil }

// Drain has nothing to wait for here.
func (s *Sockets) Drain(context.Context) error { return nil }

// TakeBack has nothing to steer here.
func (s *Sockets) TakeBack(context.Context) (bool, error) { return false, nil }
