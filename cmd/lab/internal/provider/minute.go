package provider

import "time"

// window is the length of the provider's rolling window.
const window = time.Minute

// measure is one count the minute keeps of each admission, beside its one
// request.
type measure int

const (
	// allTokens are a call's prompt and completion tokens, its completion
	// counted at its cap.
	allTokens measure = iota
	// inputTokens are a call's prompt tokens that count as input.
	inputTokens
	// outputTokens are a call's completion: its cap until it ends, then
	// the tokens it made.
	outputTokens
	measures
)

// counts are what one admission, or the minute, holds of each measure.
type counts [measures]int64

// minute counts what was admitted in the rolling minute before a time:
// each admission counts one request and its counts until exactly 60 s
// after it. It is exact, keeping one entry per admission (so at most the
// account's requests-per-minute limit of them).
//
// The zero minute is empty and ready to use. It is not safe for concurrent
// use.
type minute struct {
	entries []entry // oldest first, in the order of their seq
	sums    counts  // the sum of the entries' counts
	next    uint64  // the seq of the next admission
}

// entry is one admission.
type entry struct {
	at  time.Time
	seq uint64
	n   counts
}

// expire forgets the admissions made a minute or more before now.
func (m *minute) expire(now time.Time) {
	n := 0
	for n < len(m.entries) && !now.Before(m.entries[n].at.Add(window)) {
		m.subtract(m.entries[n].n)
		n++
	}
	m.entries = m.entries[n:]
}

func (m *minute) subtract(c counts) {
	for k := range c {
		m.sums[k] -= c[k]
	}
}

// add counts one admission of c at now and returns its seq, by which
// correct finds it. A now before the last admission (time that jumped
// backwards) counts at the last admission's time, so entries stay in
// order.
func (m *minute) add(now time.Time, c counts) uint64 {
	if n := len(m.entries); n > 0 && now.Before(m.entries[n-1].at) {
		now = m.entries[n-1].at
	}
	seq := m.next
	m.next++
	m.entries = append(m.entries, entry{at: now, seq: seq, n: c})
	for k := range c {
		m.sums[k] += c[k]
	}
	return seq
}

// correct sets the admission seq's count of k to v, if the minute still
// holds it.
func (m *minute) correct(seq uint64, k measure, v int64) {
	if len(m.entries) == 0 || seq < m.entries[0].seq {
		return
	}
	i := seq - m.entries[0].seq
	if i >= uint64(len(m.entries)) {
		return
	}
	e := &m.entries[i]
	m.sums[k] += v - e.n[k]
	e.n[k] = v
}

// requests is how many requests the minute holds.
func (m *minute) requests() int64 { return int64(len(m.entries)) }

// requestWait is how long after now one more request fits under limit
// (positive), zero if it fits now. The minute must have expired at now.
func (m *minute) requestWait(now time.Time, limit int64) time.Duration {
	excess := m.requests() + 1 - limit
	if excess <= 0 {
		return 0
	}
	return m.entries[excess-1].at.Add(window).Sub(now)
}

// wait is how long after now n more of k fit under limit (positive), zero
// if they fit now. n must not exceed limit, and the minute must have
// expired at now.
func (m *minute) wait(now time.Time, k measure, n, limit int64) time.Duration {
	need := m.sums[k] + n - limit
	if need <= 0 {
		return 0
	}
	for _, e := range m.entries {
		if need -= e.n[k]; need <= 0 {
			return e.at.Add(window).Sub(now)
		}
	}
	return m.reset(now) // not reached while n <= limit
}

// reset is how long after now the minute is empty again.
func (m *minute) reset(now time.Time) time.Duration {
	if len(m.entries) == 0 {
		return 0
	}
	return max(m.entries[len(m.entries)-1].at.Add(window).Sub(now), 0)
}

// resetOf is how long after now the minute holds none of k again.
func (m *minute) resetOf(now time.Time, k measure) time.Duration {
	for i := len(m.entries) - 1; i >= 0; i-- {
		if m.entries[i].n[k] != 0 {
			return max(m.entries[i].at.Add(window).Sub(now), 0)
		}
	}
	return 0
}
