package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit is a listener that holds at most n connections at once. A connection is taken from
// the kernel as it comes; past n, the connection idle the longest between requests (a client's
// keep-alive) is closed to make room, and when none is idle the new one waits, unserved, until
// one closes or goes idle: idle clients never hold the slot a call needs. A connection whose
// client has begun, but not finished, sending its next request's headers still counts as idle,
// as it does for the server's own idleTimeout. It is safe for concurrent use.
type connLimit struct {
	net.Listener
	slots  chan struct{}
	idled  chan struct{} // a connection went idle
	closed chan struct{}
	once   sync.Once

	mu   sync.Mutex
	idle map[net.Conn]time.Time // the connections idle between requests, since when
}

func newConnLimit(l net.Listener, n int) *connLimit {
	return &connLimit{Listener: l, slots: make(chan struct{}, n), idled: make(chan struct{}, 1), closed: make(chan struct{}),
		idle: map[net.Conn]time.Time{}}
}

// Accept takes the next connection, making room for it past the limit.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		default:
		}
		l.closeIdlest()
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		case <-l.idled:
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close stops the listener, and an Accept that waits for room.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// track is the http.Server's ConnState hook: it keeps which connections are idle.
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if state != http.StateIdle {
		delete(l.idle, c)
		return
	}
	l.idle[c] = time.Now()
	select {
	case l.idled <- struct{}{}:
	default:
	}
}

// closeIdlest closes the connection idle the longest, if one is.
func (l *connLimit) closeIdlest() {
	l.mu.Lock()
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// limitedConn gives its slot back when it closes, once.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.l.slots })
	return err
}
