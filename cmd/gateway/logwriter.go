package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logBuffer is how many bytes of log lines the gateway holds before it writes them: a write
// that would pass it writes what is held first, so the memory a log takes stays bounded.
const logBuffer = 64 << 10

// logFlush is how long a log line waits, at most, in the buffer before it is written.
const logFlush = 100 * time.Millisecond

// logWriter buffers the gateway's log lines and writes them to its output every logFlush, when
// the next would not fit in the buffer and when it is closed: a call's access-log line costs a
// copy instead of a write to the output, and no line is lost. Each write to the output holds
// whole lines. One that fails loses the lines it held, as an unbuffered write loses its own, and
// not those that come after. It is safe for concurrent use.
type logWriter struct {
	out  io.Writer
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	buf    *bufio.Writer
	closed bool // lines are written at once
}

// newLogWriter buffers the lines written to it on their way to out and flushes them every
// logFlush until Close.
func newLogWriter(out io.Writer) *logWriter {
	w := &logWriter{out: out, buf: bufio.NewWriterSize(out, logBuffer), stop: make(chan struct{}), done: make(chan struct{})}
	go w.flushEvery(logFlush)
	return w
}

// Write holds p, a line, for the next flush, writing what was held first when p would not fit.
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(p) > w.buf.Available() && w.buf.Buffered() > 0 {
		w.flush() // its error is the held lines'
	}
	n, err := w.buf.Write(p)
	if err == nil && w.closed {
		err = w.flush()
	}
	return n, err
}

// Flush writes what is held.
func (w *logWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

// flush writes what is held, which a failed write drops, so that the lines after it are
// written. w.mu is held.
func (w *logWriter) flush() error {
	err := w.buf.Flush()
	if err != nil {
		w.buf.Reset(w.out)
	}
	return err
}

// Close stops the flushes on an interval and writes what is held. Lines written after Close are
// written at once.
func (w *logWriter) Close() error {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return w.flush()
}

// flushEvery flushes the buffer every d until Close.
func (w *logWriter) flushEvery(d time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			_ = w.Flush()
		}
	}
}
