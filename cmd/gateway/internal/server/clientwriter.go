package server

import (
	"net/http"
	"time"
)

// clientWriter writes an answer to its client, each write within a timeout: a client that takes
// nothing of its answer for that long is cut off, rather than holding its call, and the goroutine
// and buffers that serve it, for as long as it keeps its connection open. A stream is flushed at
// every write, as it arrives. It is not safe for concurrent use.
type clientWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	stream  bool
	// err is the first write's error; nothing is written after it.
	err error
}

// newClientWriter writes to w, each write within timeout, flushing each when stream is true.
func newClientWriter(w http.ResponseWriter, timeout time.Duration, stream bool) *clientWriter {
	return &clientWriter{w: w, rc: http.NewResponseController(w), timeout: timeout, stream: stream}
}

// write writes p, and reports whether the client took it in time.
func (cw *clientWriter) write(p []byte) bool {
	if cw.err != nil {
		return false
	}
	cw.setDeadline()
	if _, err := cw.w.Write(p); err != nil {
		cw.err = err
		return false
	}
	if cw.stream {
		return cw.sent(cw.rc.Flush())
	}
	return true
}

// flush sends what is buffered, and reports whether the client took it in time.
func (cw *clientWriter) flush() bool {
	cw.setDeadline()
	return cw.sent(cw.rc.Flush())
}

// sent keeps the error of a flush, and reports whether there was none.
func (cw *clientWriter) sent(err error) bool {
	cw.err = err
	return err == nil
}

// setDeadline gives the next write its timeout. A writer that keeps no deadlines (a test's
// recorder) writes without one.
func (cw *clientWriter) setDeadline() {
	if cw.timeout > 0 {
		cw.rc.SetWriteDeadline(time.Now().Add(cw.timeout))
	}
}
