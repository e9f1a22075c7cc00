package server

import (
	"sync"
	"testing"
)

func TestInFlightHoldsAtMostItsLimit(t *testing.T) {
	const limit, callers = 5, 50
	var f inFlight
	var wg sync.WaitGroup
	entered := make(chan bool, callers)
	for range callers {
		wg.Go(func() { entered <- f.tryEnter(limit) })
	}
	wg.Wait()
	close(entered)
	n := 0
	for ok := range entered {
		if ok {
			n++
		}
	}
	if n != limit || f.n.Load() != limit {
		t.Fatalf("%d of %d callers entered, %d counted; want %d", n, callers, f.n.Load(), limit)
	}
	f.leave()
	if !f.tryEnter(limit) {
		t.Errorf("tryEnter after a leave = false; want true")
	}
}
