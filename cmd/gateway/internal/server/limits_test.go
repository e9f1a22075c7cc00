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
	for i := range callers {
		wg.Go(func() { entered <- f.tryEnter([]string{"acme", "globex"}[i%2], limit, 1) })
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
	f.leave("acme")
	if !f.tryEnter("acme", limit, 1) {
		t.Errorf("tryEnter after a leave = false; want true")
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		name          string
		limit, others int64
		tenants       int
		want          int64
	}{
		{"a tenant alone holds seven eighths", 16, 0, 2, 14},
		{"the next finds the rest", 16, 14, 2, 1},
		{"a tenant holds at least one while one is left", 16, 15, 3, 1},
		{"as others leave room, a tenant's share grows", 16, 8, 2, 7},
		{"a gateway of one call lets anyone have it", 1, 0, 2, 1},
		{"a configuration of one tenant gives it all", 16, 0, 1, 16},
		{"the default 2,048 alone", 2048, 0, 100, 1792},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := share(tc.limit, tc.others, tc.tenants); got != tc.want {
				t.Errorf("share(%d, %d, %d) = %d; want %d", tc.limit, tc.others, tc.tenants, got, tc.want)
			}
		})
	}
}

// TestATenantCannotHoldEveryCall fills a gateway of 16 calls from one tenant, then from others:
// the first holds 14 and no more; a second and a third find room; and as the first's calls end,
// the second takes the room they leave, up to its share, and the first cannot take it back past
// its own, which the others' calls have made smaller. The last call left waits for a newcomer.
func TestATenantCannotHoldEveryCall(t *testing.T) {
	const limit, tenants = 16, 3
	var f inFlight
	enter := func(tenant string, want int) {
		t.Helper()
		got := 0
		for range limit {
			if f.tryEnter(tenant, limit, tenants) {
				got++
			}
		}
		if got != want {
			t.Errorf("%s entered %d calls; want %d (holding %v)", tenant, got, want, f.byTenant)
		}
	}
	enter("acme", 14)
	enter("globex", 1)
	enter("initech", 1)
	enter("globex", 0)
	for range 6 {
		f.leave("acme")
	}
	enter("globex", 5) // 7/8 of the 7 acme's 8 and initech's 1 leave, 6 in all
	enter("acme", 0)   // 7/8 of the 9 the others leave is 7, less than it holds
	enter("initech", 0)
	if got := f.byTenant; got["acme"] != 8 || got["globex"] != 6 || got["initech"] != 1 || f.n.Load() != 15 {
		t.Errorf("held %v, %d in all; want acme 8, globex 6, initech 1: 15", got, f.n.Load())
	}
	for range 8 {
		f.leave("acme")
	}
	if _, ok := f.byTenant["acme"]; ok {
		t.Errorf("a tenant that holds nothing is still counted: %v", f.byTenant)
	}
}
