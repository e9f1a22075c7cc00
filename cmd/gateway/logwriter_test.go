package main

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogWriterFlushesOnAnInterval writes a line and waits for it to reach the output without
// a flush asked for.
func TestLogWriterFlushesOnAnInterval(t *testing.T) {
	var out syncBuffer
	w := newLogWriter(&out)
	defer w.Close()
	w.Write([]byte("one\n"))
	deadline := time.Now().Add(10 * logFlush)
	for out.String() != "one\n" {
		if time.Now().After(deadline) {
			t.Fatalf("after %v the output holds %q; want the line", 10*logFlush, out.String())
		}
		time.Sleep(logFlush / 10)
	}
}

// TestLogWriterLosesNoLine writes lines from many goroutines, more than the buffer holds, and
// closes the writer: every line is in the output, whole, and a line written after Close is
// written at once.
func TestLogWriterLosesNoLine(t *testing.T) {
	var out syncBuffer
	w := newLogWriter(&out)
	line := strings.Repeat("x", 99) + "\n"
	const writers, each = 8, 500
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				w.Write([]byte(line))
			}
		})
	}
	wg.Wait()
	w.Close()
	if got, want := out.String(), strings.Repeat(line, writers*each); got != want {
		t.Fatalf("the output holds %d bytes; want %d, every line whole", len(got), len(want))
	}
	w.Write([]byte("late\n"))
	if !strings.HasSuffix(out.String(), line+"late\n") {
		t.Errorf("a line written after Close is not in the output at once")
	}
}

// failingWriter fails its first write and takes the others.
type failingWriter struct {
	syncBuffer
	failed bool
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if !f.failed {
		f.failed = true
		return 0, errors.New("the output is full")
	}
	return f.syncBuffer.Write(p)
}

// TestLogWriterWritesAfterAFailure fails the first write to the output: the lines it held are
// lost, and those written after it reach the output.
func TestLogWriterWritesAfterAFailure(t *testing.T) {
	out := &failingWriter{}
	w := newLogWriter(out)
	w.Write([]byte("lost\n"))
	if err := w.Flush(); err == nil {
		t.Fatal("Flush = nil; want the output's error")
	}
	w.Write([]byte("kept\n"))
	w.Close()
	if got := out.String(); got != "kept\n" {
		t.Errorf("the output holds %q; want the line written after the failure", got)
	}
}
