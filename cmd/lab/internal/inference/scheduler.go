package inference

import (
	"cmp"
	"slices"
	"time"
)

// scheduler is the pure core of the simulated engine: continuous batching
// on a time it is told.
//
// Up to capacity sequences run at once; the rest wait in FIFO order and
// start the moment a running sequence finishes or leaves. A running
// sequence makes one token every
//
//	tokenLatency × (1 + running/capacity)
//
// where running is the size of the batch at that moment: the base latency
// alone, doubled when the batch is full. A sequence of N tokens in a steady
// batch of b takes N × that. Prefill is not modelled: the prompt costs no
// time.
//
// Progress is kept as each sequence's remaining work in nanoseconds at the
// base latency; a batch of b does capacity/(capacity+b) of a nanosecond of
// work per nanosecond, rounded down per step.
//
// The zero scheduler has no capacity and runs nothing; make one with
// newScheduler. It is not safe for concurrent use. Its methods take now
// and treat a now before the last one as the last one.
type scheduler struct {
	capacity int
	base     time.Duration
	at       time.Time // the time the state is at
	running  []seq
	waiting  []seq // FIFO
}

// seq is one sequence: its id and its remaining work.
type seq struct {
	id   uint64
	work int64
}

func newScheduler(capacity int, tokenLatency time.Duration) *scheduler {
	return &scheduler{capacity: capacity, base: tokenLatency}
}

// submit adds a sequence of tokens at now: it runs if there is room, else
// waits. It returns the ids of the sequences that finished by now.
func (s *scheduler) submit(now time.Time, id uint64, tokens int64) []uint64 {
	done := s.advance(now)
	s.waiting = append(s.waiting, seq{id: id, work: tokens * int64(s.base)})
	s.admit()
	return done
}

// cancel removes a sequence, running or waiting, at now. It returns the
// ids of the sequences that finished by now (which may include id).
func (s *scheduler) cancel(now time.Time, id uint64) []uint64 {
	done := s.advance(now)
	is := func(q seq) bool { return q.id == id }
	s.running = slices.DeleteFunc(s.running, is)
	s.waiting = slices.DeleteFunc(s.waiting, is)
	s.admit()
	return done
}

// advance runs the batch until now, finishing sequences and starting
// waiting ones in their place as it goes. It returns the ids of the
// sequences that finished, in the order they did.
func (s *scheduler) advance(now time.Time) []uint64 {
	var done []uint64
	for {
		next, ok := s.nextFinish()
		if !ok || next.After(now) {
			s.progress(now)
			return done
		}
		s.progress(next)
		done = s.retire(done)
	}
}

// nextFinish is when the first running sequence will finish if nothing
// changes, and false if none runs.
func (s *scheduler) nextFinish() (time.Time, bool) {
	if len(s.running) == 0 {
		return time.Time{}, false
	}
	least := slices.MinFunc(s.running, func(a, b seq) int { return cmp.Compare(a.work, b.work) }).work
	b := int64(len(s.running))
	c := int64(s.capacity)
	wait := (max(least, 0)*(c+b) + c - 1) / c // rounded up, so the work is done by then
	return s.at.Add(time.Duration(wait)), true
}

// progress runs the batch, unchanged, from s.at to to.
func (s *scheduler) progress(to time.Time) {
	if !to.After(s.at) {
		return
	}
	if b := int64(len(s.running)); b > 0 {
		c := int64(s.capacity)
		work := int64(to.Sub(s.at)) * c / (c + b)
		for i := range s.running {
			s.running[i].work -= work
		}
	}
	s.at = to
}

// retire moves the finished sequences' ids to done and starts waiting ones
// in their place.
func (s *scheduler) retire(done []uint64) []uint64 {
	for _, q := range s.running {
		if q.work <= 0 {
			done = append(done, q.id)
		}
	}
	s.running = slices.DeleteFunc(s.running, func(q seq) bool { return q.work <= 0 })
	s.admit()
	return done
}

// admit starts waiting sequences, oldest first, while there is room.
func (s *scheduler) admit() {
	n := min(s.capacity-len(s.running), len(s.waiting))
	if n <= 0 {
		return
	}
	s.running = append(s.running, s.waiting[:n]...)
	s.waiting = slices.Delete(s.waiting, 0, n)
}

// Load is what an engine is doing at one moment.
type Load struct {
	// Waiting is how many requests wait in the engine's queue.
	Waiting int
	// Running is how many sequences are in the running batch.
	Running int
	// Capacity is the most sequences that run at once: max-num-seqs per
	// GPU times GPUs.
	Capacity int
}

// KVCacheUsage is the share of the KV cache in use, from 0 to 1, modelled
// as Running/Capacity.
func (l Load) KVCacheUsage() float64 {
	if l.Capacity == 0 {
		return 0
	}
	return float64(l.Running) / float64(l.Capacity)
}

func (s *scheduler) load() Load {
	return Load{Waiting: len(s.waiting), Running: len(s.running), Capacity: s.capacity}
}
