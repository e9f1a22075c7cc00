package provider

import (
	"context"
	"errors"
	"sync"
)

// errCancelled is the cause of a background response's end when a client
// cancels it.
var errCancelled = errors.New("provider: response cancelled")

// runs are the background responses being made: Close ends their context
// and waits for them. Create them with newRuns. They are safe for
// concurrent use.
type runs struct {
	ctx  context.Context // ended by close
	stop context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newRuns() *runs {
	ctx, stop := context.WithCancel(context.Background())
	return &runs{ctx: ctx, stop: stop}
}

// start runs f in a goroutine that close waits for. Once close has begun it
// runs f at once instead, in the caller's goroutine: f's context has ended.
func (rs *runs) start(f func()) {
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		f()
		return
	}
	rs.wg.Add(1)
	rs.mu.Unlock()
	go func() {
		defer rs.wg.Done()
		f()
	}()
}

// close ends the runs' context and waits for them to return.
func (rs *runs) close() {
	rs.mu.Lock()
	rs.closed = true
	rs.mu.Unlock()
	rs.stop()
	rs.wg.Wait()
}

// runBackground makes a background response on its own, whatever its
// clients do, and ends it: completed and billed; cancelled, and billed for
// its input and the text made so far; or, if the provider closes first,
// failed and not billed.
func (s *Server) runBackground(r *response) {
	defer close(r.done)
	defer r.cancel(nil) // frees the run's context once it has ended
	emit := emitter(discard)
	if r.log != nil {
		emit = r.log.add
		defer r.log.end()
	}
	if s.generate(r.run, r, emit, completedBackground) == nil {
		return
	}
	if errors.Is(context.Cause(r.run), errCancelled) {
		s.cancelled(r)
		return
	}
	s.endResponse(r.admission, unserved, Bill{})
	r.fail("The provider shut down before the response completed.")
	_ = emit(r.events.Failed(r.object()))
}
