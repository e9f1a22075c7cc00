package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit is a listener that holds at most n connections at once. A connection is taken from
// the kernel as it comes; past n, the connection idle the longest between requests (a client's
// keep-alive) is closed to make room, and only when none is idle does the new one wait, unserved,
// for one to close: idle clients never hold the slot a call needs. It is safe for concurrent use.
type connLimit struct {
	net.Listener
	slots chan struct{}

	mu   sync.Mutex
	idle map[net.Conn]time.Time // the connections idle between requests, since when
}

func newConnLimit(l net.Listener, n int) *connLimit {
	return &connLimit{Listener: l, slots: make(chan struct{}, n), idle: map[net.Conn]time.Time{}}
}

// Accept takes the next connection, making room for it past the limit.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.closeIdlest()
		l.slots <- struct{}{}
	}
	return &limitedConn{Conn: c, l: l}, nil
}

// track is the http.Server's ConnState hook: it keeps which connections are idle.
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
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
