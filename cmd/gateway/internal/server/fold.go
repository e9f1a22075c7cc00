package server

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
)

// Go's HTTP server joins a header folded over several lines (obs-fold, RFC 9112, section 5.2)
// into one value, as the RFC allows, so that a handler cannot tell "Authorization: Bearer" then
// " sk-..." on the next line from one line; nor "x-api-key:" then " sk-...". A proxy in front of the gateway that reads only the
// first line would disagree with it about who calls. WatchFolds reads the bytes as they arrive
// instead, and the handlers refuse a connection's requests once it has sent such a header.

// WatchFolds returns l, each of whose connections notes an Authorization or x-api-key header
// folded over several lines. Serve it with ConnContext as the http.Server's ConnContext.
func WatchFolds(l net.Listener) net.Listener { return foldListener{l} }

// ConnContext is an http.Server's ConnContext hook that lets the handlers of a connection from
// WatchFolds see what it noted. It returns ctx as it is for any other connection.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*foldConn); ok {
		return context.WithValue(ctx, foldKey{}, &fc.scan)
	}
	return ctx
}

type foldKey struct{}

// foldedAuthorization reports whether the connection of a request's context has sent an
// Authorization or x-api-key header folded over several lines.
func foldedAuthorization(ctx context.Context) bool {
	s, _ := ctx.Value(foldKey{}).(*foldScan)
	return s != nil && s.folded.Load()
}

type foldListener struct{ net.Listener }

func (l foldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &foldConn{Conn: c}, nil
}

// foldConn is a connection whose reads are scanned for folded Authorization headers.
type foldConn struct {
	net.Conn
	scan foldScan
}

func (c *foldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.scan.scan(p[:n])
	return n, err
}

// The parts of a line foldScan keeps: its start, as long as "authorization:", and its end, as
// long as " HTTP/1.1\r".
const (
	lineHead = len("authorization:")
	lineTail = len(" HTTP/1.1\r")
)

// foldScan follows the lines a client sends on one connection, and notes an Authorization or
// x-api-key header folded over several of them. A header section runs from a request line, which ends
// with " HTTP/1.1" or " HTTP/1.0", to an empty line; a body is JSON, whose lines end outside
// strings and never so. Scans are not concurrent (the server reads a connection from one
// goroutine at a time); folded may be read at any time.
type foldScan struct {
	inHeader      bool
	authorization bool // the header section's last named header is Authorization or x-api-key
	length        int  // of the line so far
	head          [lineHead]byte
	tail          [lineTail]byte
	folded        atomic.Bool
}

// scan reads the next bytes the client sent.
func (s *foldScan) scan(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.extend(p)
			return
		}
		s.extend(p[:i])
		s.endLine()
		p = p[i+1:]
	}
}

// extend adds part of a line to the line so far, keeping its head and tail.
func (s *foldScan) extend(part []byte) {
	if s.length < lineHead {
		copy(s.head[s.length:], part)
	}
	if len(part) >= lineTail {
		copy(s.tail[:], part[len(part)-lineTail:])
	} else {
		copy(s.tail[:], s.tail[len(part):])
		copy(s.tail[lineTail-len(part):], part)
	}
	s.length += len(part)
}

// endLine takes in the line so far, which a line feed ended, and starts the next.
func (s *foldScan) endLine() {
	line := s.tail[lineTail-min(s.length, lineTail):]
	line = bytes.TrimSuffix(line, []byte("\r"))
	head := s.head[:min(s.length, lineHead)]
	switch {
	case !s.inHeader:
		s.inHeader = bytes.HasSuffix(line, []byte(" HTTP/1.1")) || bytes.HasSuffix(line, []byte(" HTTP/1.0"))
		s.authorization = false
	case len(line) == 0:
		s.inHeader = false // the header section ends
	case head[0] == ' ' || head[0] == '\t':
		if s.authorization {
			s.folded.Store(true)
		}
	default:
		s.authorization = len(head) == lineHead && bytes.EqualFold(head, []byte("authorization:")) ||
			len(head) >= len(xAPIKeyField) && bytes.EqualFold(head[:len(xAPIKeyField)], xAPIKeyField)
	}
	s.length = 0
}

// xAPIKeyField begins a header line of x-api-key, Anthropic's header of a key.
var xAPIKeyField = []byte(headerXAPIKey + ":")
