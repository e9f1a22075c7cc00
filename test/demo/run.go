package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
)

// run is the demo's testing.TB: the harness packages (test/cluster, test/proc and
// test/redisserver) take one to report failures and to register what stops their processes.
// Fatal ends the demo: main recovers, and every cleanup runs, the last registered first.
type run struct {
	testing.TB // nil; the harness calls only the methods below

	log io.Writer
	dir string // the parent of every TempDir

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	once     sync.Once
}

// fatal is what Fatal panics with, for main to recover.
type fatal struct{}

func newRun(log io.Writer) (*run, error) {
	dir, err := os.MkdirTemp("", "sluice-demo")
	if err != nil {
		return nil, err
	}
	r := &run{log: log, dir: dir}
	r.Cleanup(func() { os.RemoveAll(dir) })
	return r, nil
}

func (r *run) Helper()      {}
func (r *run) Name() string { return "demo" }

func (r *run) Logf(format string, args ...any) { fmt.Fprintf(r.log, "demo: "+format+"\n", args...) }
func (r *run) Log(args ...any)                 { fmt.Fprintln(r.log, append([]any{"demo:"}, args...)...) }

func (r *run) Errorf(format string, args ...any) {
	r.setFailed()
	r.Logf("error: "+format, args...)
}

func (r *run) Error(args ...any) {
	r.setFailed()
	r.Log(append([]any{"error:"}, args...)...)
}

func (r *run) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatal{})
}

func (r *run) Fatal(args ...any) {
	r.Error(args...)
	panic(fatal{})
}

func (r *run) Skip(args ...any) { r.Fatal(args...) }

func (r *run) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *run) setFailed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *run) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *run) TempDir() string {
	dir, err := os.MkdirTemp(r.dir, "tmp")
	if err != nil {
		r.Fatal(err)
	}
	return dir
}

// stop runs the cleanups once, the last registered first.
func (r *run) stop() {
	r.once.Do(func() {
		r.mu.Lock()
		cleanups := slices.Clone(r.cleanups)
		r.mu.Unlock()
		for _, f := range slices.Backward(cleanups) {
			f()
		}
	})
}
