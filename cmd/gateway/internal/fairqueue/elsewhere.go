package fairqueue

import "time"

// Backlog is what waits for a provider on one gateway: the user lanes with calls queued or
// expected back, the calls queued, and the comebacks expected within each of DueHorizons.
type Backlog struct {
	Lanes    int64
	Queued   Load
	Expected [len(DueHorizons)]Load
}

// Load is a count of calls and their tokens.
type Load struct {
	Calls, Tokens int64
}

// DueHorizons are the horizons a Backlog counts the comebacks expected within, the last all of
// them: another gateway's estimate counts those due within the wait it reckons, as it counts its
// own (see Queue.Expect), so that a crowd told to come back later does not hold the turns of now.
var DueHorizons = [...]time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
	160 * time.Second, 320 * time.Second, 1<<63 - 1}

// Backlog returns what waits in the queue at now: its queued items, the comebacks it expects
// within their grace by when they are due, and the user lanes they are in.
func (q *Queue) Backlog(now time.Time) Backlog {
	b := Backlog{Queued: Load{Calls: int64(q.items), Tokens: q.cost}}
	for class, r := range q.classes {
		for _, t := range r.tenants {
			b.Lanes += int64(len(t.byUser))
		}
		for tenant, t := range q.expected[class].tenants {
			for user := range t.users {
				due := t.of(user, now)
				if len(due) == 0 {
					continue
				}
				b.expect(due, now)
				if queued := r.tenants[tenant]; queued == nil || queued.byUser[user] == nil {
					b.Lanes++
				}
			}
		}
	}
	return b
}

// expect counts comebacks due, at now, in each horizon they are due within.
func (b *Backlog) expect(due []comeback, now time.Time) {
	for _, c := range due {
		for h, within := range DueHorizons {
			if c.at.Sub(now) <= within {
				b.Expected[h].Calls++
				b.Expected[h].Tokens += c.cost
			}
		}
	}
}

// Waiting reports whether anything waits in the backlog.
func (b Backlog) Waiting() bool {
	return b.Queued.Calls > 0 || b.Expected[len(DueHorizons)-1].Calls > 0
}

// within is the load queued or expected back within wait.
func (b Backlog) within(wait time.Duration) Load {
	l := b.Queued
	for h, horizon := range DueHorizons {
		if wait <= horizon {
			l.Calls += b.Expected[h].Calls
			l.Tokens += b.Expected[h].Tokens
			break
		}
	}
	return l
}

// SetElsewhere tells the queue what waits for its provider on each other gateway sharing it
// (nil when it is alone, or does not know). ComebackWait then counts that work too, at its turns:
// the gateways serve their lanes fairly together (see package fairshare), so over a long wait a
// call waits for every lane's work before it, wherever that lane waits, and a gateway whose lanes
// outlast the others' drains the whole provider once theirs are done.
func (q *Queue) SetElsewhere(backlogs []Backlog) { q.elsewhere = backlogs }

// elsewhereWork is the tokens the other gateways serve while a lane takes turns turns within
// wait: each of their lanes one call a turn, up to the calls it has queued or expected back by
// then, their lanes taken as alike. Where in a round their turns come beside the lane's is not
// known: half of them are counted in the last.
func (q *Queue) elsewhereWork(turns int64, wait time.Duration) float64 {
	var work float64
	rounds := float64(turns) - 0.5
	for _, b := range q.elsewhere {
		l := b.within(wait)
		if b.Lanes <= 0 || l.Calls <= 0 {
			continue
		}
		perLane := float64(l.Calls) / float64(b.Lanes)
		work += float64(b.Lanes) * min(perLane, rounds) * float64(l.Tokens) / float64(l.Calls)
	}
	return work
}
