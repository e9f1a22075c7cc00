package inference

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSchedulerFinishTimes(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name     string
		capacity int
		tokens   []int64 // sequences 1, 2, ... submitted at t0 in order
		want     map[uint64]time.Duration
	}{{
		name:     "one sequence alone: 10 × 20 ms × (1 + 1/4)",
		capacity: 4,
		tokens:   []int64{10},
		want:     map[uint64]time.Duration{1: 250 * ms},
	}, {
		name:     "a full batch takes twice the base latency a token",
		capacity: 4,
		tokens:   []int64{10, 10, 10, 10},
		want:     map[uint64]time.Duration{1: 400 * ms, 2: 400 * ms, 3: 400 * ms, 4: 400 * ms},
	}, {
		name:     "tokens get faster as the batch shrinks",
		capacity: 2,
		tokens:   []int64{10, 20}, // 40 ms a token for 10, then 30 ms for 10 more
		want:     map[uint64]time.Duration{1: 400 * ms, 2: 700 * ms},
	}, {
		name:     "a full engine queues in order",
		capacity: 1,
		tokens:   []int64{10, 10, 5},
		want:     map[uint64]time.Duration{1: 400 * ms, 2: 800 * ms, 3: 1000 * ms},
	}, {
		name:     "a waiting sequence starts the moment one finishes",
		capacity: 2,
		tokens:   []int64{5, 10, 10}, // 3 starts at 200 ms; 2 and 3 share 40 ms tokens until 400 ms
		want:     map[uint64]time.Duration{1: 200 * ms, 2: 400 * ms, 3: 550 * ms},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScheduler(tc.capacity, 20*ms)
			for i, n := range tc.tokens {
				s.submit(t0, uint64(i+1), n)
			}
			got := map[uint64]time.Duration{}
			for range len(tc.tokens) {
				next, ok := s.nextFinish()
				if !ok {
					break
				}
				for _, id := range s.advance(next) {
					got[id] = next.Sub(t0)
				}
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("finish times mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestSchedulerSteps(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		at          time.Duration
		op          string // submit, cancel or advance
		id          uint64
		tokens      int64
		wantDone    []uint64
		wantRunning []uint64
		wantWaiting []uint64
	}
	tests := []struct {
		name     string
		capacity int
		steps    []step
	}{{
		name:     "admission is first in, first out, and a full engine queues",
		capacity: 2,
		steps: []step{
			{op: "submit", id: 1, tokens: 10, wantRunning: []uint64{1}},
			{op: "submit", id: 2, tokens: 20, wantRunning: []uint64{1, 2}},
			{op: "submit", id: 3, tokens: 10, wantRunning: []uint64{1, 2}, wantWaiting: []uint64{3}},
			{op: "submit", id: 4, tokens: 10, wantRunning: []uint64{1, 2}, wantWaiting: []uint64{3, 4}},
			{at: 399 * ms, op: "advance", wantRunning: []uint64{1, 2}, wantWaiting: []uint64{3, 4}},
			{at: 400 * ms, op: "advance", wantDone: []uint64{1}, wantRunning: []uint64{2, 3}, wantWaiting: []uint64{4}},
		},
	}, {
		name:     "a client that leaves gives up its place",
		capacity: 1,
		steps: []step{
			{op: "submit", id: 1, tokens: 10, wantRunning: []uint64{1}},
			{op: "submit", id: 2, tokens: 10, wantRunning: []uint64{1}, wantWaiting: []uint64{2}},
			{op: "submit", id: 3, tokens: 10, wantRunning: []uint64{1}, wantWaiting: []uint64{2, 3}},
			{at: 100 * ms, op: "cancel", id: 2, wantRunning: []uint64{1}, wantWaiting: []uint64{3}},
			{at: 100 * ms, op: "cancel", id: 1, wantRunning: []uint64{3}},
			// 3 started at 100 ms: 10 tokens of 40 ms.
			{at: 500 * ms, op: "advance", wantDone: []uint64{3}},
		},
	}, {
		name:     "time that jumps backwards stands still",
		capacity: 1,
		steps: []step{
			{at: 100 * ms, op: "submit", id: 1, tokens: 10, wantRunning: []uint64{1}},
			{at: 50 * ms, op: "advance", wantRunning: []uint64{1}},
			{at: 499 * ms, op: "advance", wantRunning: []uint64{1}},
			{at: 500 * ms, op: "advance", wantDone: []uint64{1}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScheduler(tc.capacity, 20*ms)
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				var done []uint64
				switch st.op {
				case "submit":
					done = s.submit(now, st.id, st.tokens)
				case "cancel":
					done = s.cancel(now, st.id)
				default:
					done = s.advance(now)
				}
				got := [][]uint64{done, ids(s.running), ids(s.waiting)}
				want := [][]uint64{st.wantDone, st.wantRunning, st.wantWaiting}
				if diff := cmp.Diff(got, want, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("step %d (%s %d at %v): done, running, waiting mismatch (-got +want):\n%s", i, st.op, st.id, st.at, diff)
				}
			}
			if got, want := s.load(), (Load{Waiting: len(s.waiting), Running: len(s.running), Capacity: tc.capacity}); got != want {
				t.Errorf("load() = %+v; want %+v", got, want)
			}
		})
	}
}

func ids(seqs []seq) []uint64 {
	var out []uint64
	for _, q := range seqs {
		out = append(out, q.id)
	}
	return out
}

func TestKVCacheUsage(t *testing.T) {
	tests := []struct {
		load Load
		want float64
	}{
		{Load{}, 0},
		{Load{Running: 0, Capacity: 256}, 0},
		{Load{Running: 64, Waiting: 10, Capacity: 256}, 0.25},
		{Load{Running: 256, Waiting: 10, Capacity: 256}, 1},
	}
	for _, tc := range tests {
		if got := tc.load.KVCacheUsage(); got != tc.want {
			t.Errorf("%+v.KVCacheUsage() = %v; want %v", tc.load, got, tc.want)
		}
	}
}
