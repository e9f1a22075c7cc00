package provider

import "time"

// window is the length of the provider's rolling window.
const window = time.Minute

// minute counts what was admitted in the rolling minute before a time:
// each admission counts one request and its tokens until exactly 60 s after
// it. It is exact, keeping one entry per admission (so at most the
// account's requests-per-minute limit of them).
//
// The zero minute is empty and ready to use. It is not safe for concurrent
// use.
type minute struct {
	entries []entry // oldest first
	tokens  int64   // the sum of the entries' tokens
}

// entry is one admission.
type entry struct {
	at     time.Time
	tokens int64
}

// expire forgets the admissions made a minute or more before now.
func (m *minute) expire(now time.Time) {
	n := 0
	for n < len(m.entries) && !now.Before(m.entries[n].at.Add(window)) {
		m.tokens -= m.entries[n].tokens
		n++
	}
	m.entries = m.entries[n:]
}

// add counts one admission of tokens at now. A now before the last
// admission (time that jumped backwards) counts at the last admission's
// time, so entries stay in order.
func (m *minute) add(now time.Time, tokens int64) {
	if n := len(m.entries); n > 0 && now.Before(m.entries[n-1].at) {
		now = m.entries[n-1].at
	}
	m.entries = append(m.entries, entry{at: now, tokens: tokens})
	m.tokens += tokens
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

// tokenWait is how long after now a request of tokens fits under limit
// (positive), zero if it fits now. tokens must not exceed limit, and the
// minute must have expired at now.
func (m *minute) tokenWait(now time.Time, tokens, limit int64) time.Duration {
	need := m.tokens + tokens - limit
	if need <= 0 {
		return 0
	}
	for _, e := range m.entries {
		if need -= e.tokens; need <= 0 {
			return e.at.Add(window).Sub(now)
		}
	}
	return m.reset(now) // not reached while tokens <= limit
}

// reset is how long after now the minute is empty again.
func (m *minute) reset(now time.Time) time.Duration {
	if len(m.entries) == 0 {
		return 0
	}
	return max(m.entries[len(m.entries)-1].at.Add(window).Sub(now), 0)
}
