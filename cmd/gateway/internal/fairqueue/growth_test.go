package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHorizonBoundsWaitsBehindALaneWhileLanesJoin checks the horizon's rule on a fake clock: no
// bound for an item its lane's first, or when other lanes did not keep joining through the
// window (none joined, or a crowd at once and nobody since); a bound that shortens as lanes keep
// joining, counting other users of its tenant once each, and other tenants by weight, but not an
// item that came back when told.
func TestHorizonBoundsWaitsBehindALaneWhileLanesJoin(t *testing.T) {
	q := New(Options{})
	push := func(tenant, user string, weight int32, joins time.Time, n int) []*Item {
		items := make([]*Item, n)
		for i := range items {
			items[i] = item(tenant, user, weight, Batch, 1000)
			items[i].Joins = joins
			q.Push(items[i])
		}
		return items
	}
	old := push("t", "old", 1, t0.Add(-time.Minute), 5)
	for _, user := range []string{"a1", "a2", "a3"} {
		push("t", user, 1, t0.Add(-6*time.Second), 2)
	}
	mine := push("t", "me", 1, t0, 5)
	if h := Horizon(q.Growth(mine[3], t0)); h != -1 {
		t.Errorf("with three lanes joined at once 6 s ago and none since, horizon = %v, want none", h)
	}
	push("t", "new", 1, t0.Add(time.Second), 5)
	now := t0.Add(2 * time.Second)
	// Three lanes joined in the window's first half, one other in its second: lanes keep joining
	// at two a window, a third of the six, and a tenth of them joins in 3 s.
	if got, want := Horizon(q.Growth(mine[3], now)), 3*time.Second; got != want {
		t.Errorf("with lanes joining at two a window beside six, horizon = %v, want %v", got, want)
	}
	if got, want := Horizon(q.Growth(old[1], now)), 1500*time.Millisecond; got != want {
		t.Errorf("for a lane that was there before me and new joined, horizon = %v, want %v", got, want)
	}
	if h := Horizon(q.Growth(mine[0], now)); h != -1 {
		t.Errorf("for its lane's first, horizon = %v, want none: who joins later comes after it", h)
	}
	// A user who comes with one call, leaves and comes again within the window joins once; an
	// item that came back when told joins nothing.
	once := push("t", "once", 1, now, 1)
	q.Pop(once[0])
	push("t", "once", 1, now.Add(time.Second), 1)
	push("t", "back", 1, time.Time{}, 2)
	if got, want := Horizon(q.Growth(mine[3], now.Add(time.Second))), 2*time.Second; got != want {
		t.Errorf("with two other lanes joined in either half of the window, beside eight, horizon = %v, want %v", got, want)
	}
	later := t0.Add(GrowthWindow + 2*time.Second)
	if h := Horizon(q.Growth(mine[3], later)); h != -1 {
		t.Errorf("a window after the last lane joined, horizon = %v, want none", h)
	}
	push("early", "e", 1, later.Add(-6*time.Second), 2)
	push("other", "o", 3, later, 2)
	// Tenants of weight 1 and 3 joined beside "t" (weight 1), one in each half of the window: a
	// pace of 2 a window beside weights of 5.
	share := 0.4
	if got, want := Horizon(q.Growth(mine[3], later)), time.Duration(steadyShare/share*float64(GrowthWindow)); got != want {
		t.Errorf("with tenants joining at a weight of 2 a window beside 5, horizon = %v, want %v", got, want)
	}
}

// TestTheHorizonKeepsPromisesNearWhileACrowdGrows drains a queue on a fake clock while a crowd
// joins, a user every half second for 20 s, each with a book sent at once, through a door that
// lets in what it estimates will wait no longer than the plan's bound, and the horizon too, and
// tells the rest when to come back as the gateway does: in whole seconds, and at most three
// times, as the lab's users. The queue serves its rounds alone, so that the horizon is measured
// by itself (TestPromisesKeepTheDoorsEstimatesWhileACrowdGrows adds the promises). Without the
// horizon, the waits promised are off by several times, as the users who join take turns ahead
// of them; with it, once the crowd has kept joining for half a window (before that its pace does
// not show), the error's p90 over the waits promised is a quarter of that or less, no page is
// lost, and a page is turned away at most 1.5 times on average. A crowd that comes at once, with
// nobody after it, meets no horizon: its lanes are all in the estimates.
func TestTheHorizonKeepsPromisesNearWhileACrowdGrows(t *testing.T) {
	paced := GrowthWindow / 2
	with, without := crowd(crowdDoor{horizon: true}, 500*time.Millisecond), crowd(crowdDoor{}, 500*time.Millisecond)
	for _, c := range []crowdRun{with, without} {
		t.Logf("a user every 500ms, horizon %v: %d waits promised, p90 of their error %.0f%% (from %v on: %.0f%%), %.2f refusals a page, %d pages lost",
			c.horizon, len(c.errors), 100*c.p90(0), paced, 100*c.p90(paced), c.refusalsPerPage, c.lost)
	}
	if 4*with.p90(paced) > without.p90(paced) {
		t.Errorf("the error's p90 over the waits promised from %v on: %.0f%% with the horizon, %.0f%% without; want a quarter or less", paced, 100*with.p90(paced), 100*without.p90(paced))
	}
	if with.lost > 0 || with.refusalsPerPage > 1.5 {
		t.Errorf("with the horizon, %d pages lost and %.2f refusals a page; want none and at most 1.5", with.lost, with.refusalsPerPage)
	}
	if with, without := crowd(crowdDoor{horizon: true}, 0), crowd(crowdDoor{}, 0); with.refusalsPerPage != without.refusalsPerPage || with.lost != without.lost {
		t.Errorf("a crowd at once: %.2f refusals a page and %d pages lost with the horizon, %.2f and %d without; want the same (only maxWait turns pages away)",
			with.refusalsPerPage, with.lost, without.refusalsPerPage, without.lost)
	}
}

// crowdRun is what the door of crowd did: the errors of the waits it promised, as a share of
// each.
type crowdRun struct {
	horizon         bool
	errors          []promise
	refusalsPerPage float64
	lost            int
}

// promise is a wait promised, when, from the crowd's start, and its error as a share of it.
type promise struct {
	at    time.Duration
	error float64
}

// p90 is the 90th percentile of the errors of the waits promised from from on; zero for none.
func (c crowdRun) p90(from time.Duration) float64 {
	var errs []float64
	for _, p := range c.errors {
		if p.at >= from {
			errs = append(errs, p.error)
		}
	}
	if len(errs) == 0 {
		return 0
	}
	slices.Sort(errs)
	return errs[len(errs)*9/10]
}

// crowdDoor says how the door of crowd works: with the horizon or without, and with a queue that
// keeps its promises or serves its rounds alone.
type crowdDoor struct{ horizon, promises bool }

// crowd runs the crowd of TestTheHorizonKeepsPromisesNearWhileACrowdGrows, its users apart by
// spacing, through a door that works as opts says.
func crowd(opts crowdDoor, spacing time.Duration) crowdRun {
	const (
		rate      = 6000.0 // tokens a second
		cost      = 1000
		pages     = 12
		users     = 40
		maxWait   = time.Minute
		comebacks = 3
		slot      = time.Second * cost / rate // one item's share of the drain
	)
	q := New(Options{})
	type call struct {
		it       *Item
		refused  int
		at       time.Time
		estimate time.Duration
	}
	var arrivals []*call
	for k := range users {
		at := t0.Add(time.Duration(k) * spacing)
		for range pages {
			arrivals = append(arrivals, &call{it: item("t", fmt.Sprint("u", k), 1, Batch, cost), at: at})
		}
	}
	jitter := rand.New(rand.NewPCG(1, 2))
	run := crowdRun{horizon: opts.horizon}
	// door lets c in at now, or returns it to come back.
	door := func(c *call, now time.Time) *call {
		_, cameBack := q.CameBack(c.it, now)
		c.it.Joins = time.Time{}
		if !cameBack {
			c.it.Joins = now
		}
		c.estimate = q.EstimateWait(c.it, rate, now)
		bound := time.Duration(maxWait)
		if h := Horizon(q.Growth(c.it, now)); opts.horizon && !cameBack && h >= 0 {
			bound = min(bound, max(h, time.Millisecond))
		}
		if c.estimate <= bound {
			c.at = now
			q.Push(c.it)
			if opts.promises {
				q.Promise(c.it)
			}
			return nil
		}
		if c.refused++; c.refused > comebacks {
			run.lost++
			return nil
		}
		back := max(q.ComebackWait(c.it, rate, now)-bound/2, 0) + time.Duration(jitter.Float64()*float64(slot))
		back = max((back + time.Second - 1).Truncate(time.Second), time.Second) // as Retry-After says it
		q.Expect(c.it, now, now.Add(back))
		c.at = now.Add(back)
		return c
	}
	queued := map[*Item]*call{}
	for now := t0; now.Before(t0.Add(10*time.Minute)) && (len(arrivals) > 0 || q.Len() > 0); now = now.Add(slot) {
		var later []*call
		for _, c := range arrivals {
			if c.at.After(now) {
				later = append(later, c)
			} else if back := door(c, now); back != nil {
				later = append(later, back)
			} else if c.it.Queued() {
				queued[c.it] = c
			}
		}
		arrivals = later
		it, _ := q.Next(now)
		if it == nil {
			continue
		}
		q.Pop(it) // served by the end of this slot
		c := queued[it]
		run.refusalsPerPage += float64(c.refused) / (users * pages)
		if c.estimate > 0 {
			waited := now.Add(slot).Sub(c.at)
			e := float64(max(waited-c.estimate, c.estimate-waited)) / float64(c.estimate)
			run.errors = append(run.errors, promise{c.at.Sub(t0), e})
		}
	}
	return run
}

// BenchmarkGrowth measures the door's reading of the pace behind a lane, with n users of one
// tenant joined over the last window: it stays near constant as n grows.
func BenchmarkGrowth(b *testing.B) {
	for _, n := range []int{10, 1000, 10_000} {
		b.Run(fmt.Sprint(n, " users joined"), func(b *testing.B) {
			q := New(Options{})
			var behind *Item
			for k := range n {
				at := t0.Add(time.Duration(k) * GrowthWindow / time.Duration(n))
				for range 2 {
					behind = item("t", fmt.Sprint("u", k), 1, Batch, 1000)
					behind.Joins = at
					q.Push(behind)
				}
			}
			now := t0.Add(GrowthWindow - time.Millisecond)
			for b.Loop() {
				q.Growth(behind, now)
			}
		})
	}
}

// TestPromisesKeepTheDoorsEstimatesWhileACrowdGrows runs the crowd of
// TestTheHorizonKeepsPromisesNearWhileACrowdGrows through the door with its horizon, as the
// gateway does, once with a queue that keeps the door's promises (see Item.Promise) and once with
// one that serves its rounds alone. While the crowd joins, the rounds let each newcomer take turns
// ahead of what the door promised before it came; keeping the promises, the error's p90 over every
// wait promised, from the crowd's first second, is half of that or less, with no page lost.
func TestPromisesKeepTheDoorsEstimatesWhileACrowdGrows(t *testing.T) {
	for _, spacing := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		kept, rounds := crowd(crowdDoor{horizon: true, promises: true}, spacing), crowd(crowdDoor{horizon: true}, spacing)
		t.Logf("a user every %v: p90 of the error %.0f%% with promises kept, %.0f%% without; %.2f and %.2f refusals a page",
			spacing, 100*kept.p90(0), 100*rounds.p90(0), kept.refusalsPerPage, rounds.refusalsPerPage)
		if 2*kept.p90(0) > rounds.p90(0) || kept.lost > 0 {
			t.Errorf("a user every %v: p90 of the error %.0f%% with promises kept, %.0f%% without, %d pages lost; want half or less, and none lost",
				spacing, 100*kept.p90(0), 100*rounds.p90(0), kept.lost)
		}
	}
}
