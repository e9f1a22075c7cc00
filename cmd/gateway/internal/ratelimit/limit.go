// Package ratelimit decides whether a request may go now, over every level that applies to it
// (user, tenant, endpoint, global, provider) and every dimension (requests, tokens, input and
// output tokens, dollars, calls in flight), and takes from all of them or from none.
//
// Rates are token buckets with variable cost, kept as one number per key (GCRA: the theoretical
// arrival time). A provider's per-minute limits are rolling windows: the provider counts any
// sixty seconds, so the limiter counts a minute in slots of a second and lets a request through
// only when the slots that overlap the last minute, with it, hold no more than the limit (see
// NewRolling), beside a bucket that paces it and lets a request past its burst when full (see
// NewPace). Plan quotas and budgets, and a provider's day, are calendar windows that reset at
// midnight or on the first of the month in the plan's (or the provider's) time zone. Calls in flight are counters. A refusal is a
// Decision, not an error; it says which level refused and how long until the request would pass,
// so a queue can wait exactly that long.
//
// State lives in a Memory store (one process) or in Redis (every replica shares one budget).
package ratelimit

import (
	"fmt"
	"sync/atomic"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// Level is where a limit applies. It is reported when that limit refuses.
type Level uint8

// The levels, in the order a decision checks them.
const (
	LevelUser Level = iota
	LevelTenant
	LevelEndpoint
	LevelGlobal
	LevelProvider
)

var levelNames = [...]string{"user", "tenant", "endpoint", "global", "provider"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", l)
}

// Dimension is what a limit counts.
type Dimension uint8

// The dimensions. Tokens are a call's input and output together; InputTokens and OutputTokens
// each alone. Dollars are counted in micro-dollars. A scope's mark (see NewMark) counts the
// record's versions.
const (
	Requests Dimension = iota
	Tokens
	MicroDollars
	InFlight
	Version
	InputTokens
	OutputTokens
)

var dimensionNames = [...]string{"requests", "tokens", "microdollars", "inflight", "version", "inputtokens", "outputtokens"}

// CountsTokens reports whether d counts tokens: all of a call's, its input's or its output's.
func (d Dimension) CountsTokens() bool {
	return d == Tokens || d == InputTokens || d == OutputTokens
}

func (d Dimension) String() string {
	if int(d) < len(dimensionNames) {
		return dimensionNames[d]
	}
	return fmt.Sprintf("Dimension(%d)", d)
}

// kind is how a limit counts.
type kind uint8

const (
	bucket kind = iota + 1
	window
	concurrency
	rolling
	mark
)

// Period is the length of a calendar window.
type Period uint8

// The calendar periods.
const (
	Day Period = iota + 1
	Month
)

// Calendar says when a window resets: at midnight (Day) or on the first of the month (Month), in
// Location. A nil Location is UTC.
type Calendar struct {
	Period   Period
	Location *time.Location
}

// Bounds returns the start and end of the window that holds now.
func (c Calendar) Bounds(now time.Time) (start, end time.Time) {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := now.In(loc).Date()
	if c.Period == Month {
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// Limit is one limit on one key, made by NewBucket, NewRolling, NewWindow or NewConcurrency. A Limit is
// immutable and safe to share between goroutines; build it once (when the configuration loads),
// not per request.
type Limit struct {
	// Key names the limit's state in the store. Keys of one decision must differ. On Redis
	// Cluster, the keys of one hash tag, like "{openai}:...", are checked and taken together in
	// one slot; a decision over several hash tags takes longer when it is refused (see Redis).
	Key string
	// Level is where the limit applies, for reporting.
	Level Level
	// Dimension is what the limit counts, for reporting.
	Dimension Dimension

	kind        kind
	capacity    int64         // bucket: burst; window and rolling: quota; concurrency: most at once
	largest     int64         // the most one request may take: capacity, but a pace's (NewPace)
	interval    time.Duration // bucket: the time to earn one unit back; rolling: a slot's length
	perInterval float64       // bucket: 1/interval, to count units without a division
	slots       int64         // rolling: the slots a period is counted in
	calendar    Calendar      // window: when it resets
	leaseTTL    time.Duration // concurrency: how long an unreleased slot is held in Redis
	// stated and per are the limit as its configuration states it: stated units every per (a
	// bucket, a pace, a rolling window), or in each calendar window, or at once.
	stated int64
	per    time.Duration

	// cell is the Memory store's state for Key, bound at first use so that a decision finds its
	// state without a map lookup.
	cell atomic.Pointer[cell]
	// script holds the Redis script's arguments that never change (see scriptConstants), boxed
	// once rather than at every decision.
	script [4]any
}

// NewBucket returns a token bucket that earns rate units every per, up to burst units. A request
// may take up to burst units at once.
func NewBucket(key string, level Level, dim Dimension, rate int64, per time.Duration, burst int64) (*Limit, error) {
	if err := gatewayv1.CheckRate(rate, per, burst); err != nil {
		return nil, fmt.Errorf("ratelimit: bucket %q: %w", key, err)
	}
	interval := per / time.Duration(rate)
	return newLimit(key, level, dim, bucket, burst, func(l *Limit) {
		l.interval, l.perInterval = interval, 1/float64(interval)
		l.stated, l.per = rate, per
	}), nil
}

// NewPace returns a bucket, as NewBucket, that also lets one request take more than burst, up to
// largest, when it is full: the bucket is then in debt, and refills from there. The debt holds back
// the requests past the burst after it; a request within the burst finds the bucket empty at
// most (see Decision.evaluateBucket). A pace sits beside a limit of its own (a provider's rolling
// minute) to spread what that limit allows: its burst smooths, and need not bound the largest
// request the limit lets through, nor hold back, behind a lone large one, the requests that the
// limit has room for.
func NewPace(key string, level Level, dim Dimension, rate int64, per time.Duration, burst, largest int64) (*Limit, error) {
	if largest < burst {
		return nil, fmt.Errorf("ratelimit: pace %q: its largest request %d must be at least its burst %d", key, largest, burst)
	}
	if err := gatewayv1.CheckRate(rate, per, largest); err != nil { // largest × interval fits as a burst would
		return nil, fmt.Errorf("ratelimit: pace %q: %w", key, err)
	}
	l, err := NewBucket(key, level, dim, rate, per, burst)
	if err != nil {
		return nil, err
	}
	l.largest, l.stated = largest, largest // the limit it paces: largest every per
	l.script = scriptConstants(l)
	return l, nil
}

// NewRolling returns a rolling window that allows at most capacity units in any span of period,
// counted in slots of period/slots each. A decision counts in full every slot that overlaps the
// period before it (slots+1 of them, the oldest partly past), so no span of period ever holds
// more than capacity; while a backlog lasts, capacity × slots/(slots+1) pass each period (60
// slots: 98.4%). A request may take up to capacity at once. A slot must last a whole number of
// microseconds, Redis's unit; capacity and slots are bounded (gatewayv1.CheckRolling) so that
// every count stays exact in the Redis script's numbers.
func NewRolling(key string, level Level, dim Dimension, capacity int64, period time.Duration, slots int64) (*Limit, error) {
	if err := gatewayv1.CheckRolling(capacity, period, slots); err != nil {
		return nil, fmt.Errorf("ratelimit: rolling window %q: %w", key, err)
	}
	return newLimit(key, level, dim, rolling, capacity, func(l *Limit) {
		l.interval, l.slots = period/time.Duration(slots), slots
		l.perInterval = 1 / float64(l.interval)
		l.per = period
	}), nil
}

// NewWindow returns a calendar window that allows quota units between two resets.
func NewWindow(key string, level Level, dim Dimension, quota int64, cal Calendar) (*Limit, error) {
	if quota <= 0 || (cal.Period != Day && cal.Period != Month) {
		return nil, fmt.Errorf("ratelimit: window %q: quota %d must be positive and the period a day or a month", key, quota)
	}
	return newLimit(key, level, dim, window, quota, func(l *Limit) { l.calendar = cal }), nil
}

// NewConcurrency returns a limit of max calls in flight. In Redis, a slot that is never released
// (its gateway died) is freed after leaseTTL; make it longer than the longest call.
func NewConcurrency(key string, level Level, max int64, leaseTTL time.Duration) (*Limit, error) {
	if max <= 0 || leaseTTL <= 0 {
		return nil, fmt.Errorf("ratelimit: concurrency %q: max %d and lease %s must be positive", key, max, leaseTTL)
	}
	return newLimit(key, level, InFlight, concurrency, max, func(l *Limit) { l.leaseTTL = leaseTTL }), nil
}

func newLimit(key string, level Level, dim Dimension, k kind, capacity int64, set func(*Limit)) *Limit {
	l := &Limit{Key: key, Level: level, Dimension: dim, kind: k, capacity: capacity, largest: capacity, stated: capacity}
	set(l)
	l.script = scriptConstants(l)
	return l
}

// Capacity returns the most the limit allows at once: a bucket's burst, a window's quota (calendar
// or rolling), or the most calls in flight.
func (l *Limit) Capacity() int64 { return l.capacity }

// Stated returns the limit as its configuration states it: an amount, and how it is counted ("a
// minute", "every 2s", "a day", "a month", "at once").
func (l *Limit) Stated() (int64, string) {
	switch {
	case l.kind == window && l.calendar.Period == Month:
		return l.stated, "a month"
	case l.kind == window:
		return l.stated, "a day"
	case l.per == 0:
		return l.stated, "at once"
	}
	return l.stated, perText(l.per)
}

// perText is "a second", "a minute", "an hour" or "a day", or "every" and the duration.
func perText(d time.Duration) string {
	switch d {
	case time.Second:
		return "a second"
	case time.Minute:
		return "a minute"
	case time.Hour:
		return "an hour"
	case 24 * time.Hour:
		return "a day"
	}
	return "every " + d.String()
}

// Largest returns the most one request may take: its Capacity, but for a pace (NewPace), which
// lets a request past its burst when it is full.
func (l *Limit) Largest() int64 { return l.largest }

// Rate returns the units a second the limit lets through while a backlog lasts: a bucket's rate, a
// rolling window's capacity a period at slots/(slots+1); zero for a calendar window or calls in
// flight, which have none.
func (l *Limit) Rate() float64 {
	switch l.kind {
	case bucket:
		return l.perInterval * float64(time.Second)
	case rolling:
		return float64(l.capacity) / float64(l.slots+1) * l.perInterval * float64(time.Second)
	}
	return 0
}

// IsMark reports whether the limit is a scope's mark (see NewMark).
func (l *Limit) IsMark() bool { return l.kind == mark }

// IsWindow reports whether the limit is a calendar window (a quota or a budget that resets at
// midnight or on the first of the month) rather than a rate or calls in flight.
func (l *Limit) IsWindow() bool { return l.kind == window }

// IsBucket reports whether the limit is a token bucket (see NewBucket and NewPace).
func (l *Limit) IsBucket() bool { return l.kind == bucket }

// Check is one limit a request must pass and what the request costs on it. In Settle, Cost is
// the difference to add (negative to refund).
type Check struct {
	Limit *Limit
	Cost  int64
	// Lease names the request's slot on a concurrency limit, so that Redis can free it if the
	// gateway dies. Other limits ignore it.
	Lease string
	// Took is, in a settlement, when the decision it settles was taken (that Decision's At): a
	// rolling window settles into the slot that decision took from. Zero settles into the current
	// slot. Decisions and other limits ignore it.
	Took time.Time
}

// Reads returns a check of cost zero on each of limits: what Peek reads of a limit alone.
func Reads(limits ...*Limit) []Check {
	checks := make([]Check, len(limits))
	for i, l := range limits {
		checks[i].Limit = l
	}
	return checks
}

// unixNano returns t in nanoseconds since the Unix epoch, or 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// MaxChecks is the most checks one decision may hold: a call's user, tenant, endpoint and global
// limits, and its provider's, of which each per-minute limit takes two (its rolling minute and
// its pace).
const MaxChecks = 24

// Decision is the answer to one request over all its checks.
//
// A caller keeps a Decision and has a store write each decision into it: a decision fills
// Remaining and Reset for its checks only, so that none clears or copies the rest of the arrays,
// which are most of a Decision's size. Entries past the checks are those of an earlier decision.
type Decision struct {
	// Allowed is true when every check passed and every cost was taken.
	Allowed bool
	// Refused is the index of the first check that refused, or -1.
	Refused int
	// RetryAfter is how long until every refusing check would pass with the same costs, if nothing
	// else takes from them. A refusal by calls in flight alone has RetryAfter 0: it passes when a
	// call ends.
	RetryAfter time.Duration
	// Never is true when a cost is larger than its limit's capacity: waiting will not help.
	Never bool
	// At is when the decision was taken, by the store's clock (Redis's own, unless the caller's
	// was sent): what a settlement of it passes as Check.Took.
	At time.Time
	// Remaining holds, for each check, the units left after this decision.
	Remaining [MaxChecks]int64
	// Reset holds, for each check, the time until its limit is whole again: a bucket full, a
	// window reset, a rolling window's last counted slot past.
	Reset [MaxChecks]time.Duration
}

// Reading is what a check's limit holds now, as Peek reads it.
type Reading struct {
	// Remaining is the units left.
	Remaining int64
	// Reset is the time until the limit is whole again: a bucket full, a window reset.
	Reset time.Duration
	// Wait is how long a decision of the check's cost would wait were nothing else taken from
	// the limit meanwhile: zero when it would pass now, or never will (a cost past the limit's
	// largest). A rolling window holds a large cost once enough of its slots are past, a pace
	// one past its burst once it is full.
	Wait time.Duration
}

// RefusedBy returns the limit that refused, or nil when the decision allowed.
func (d *Decision) RefusedBy(checks []Check) *Limit {
	if d.Refused < 0 || d.Refused >= len(checks) {
		return nil
	}
	return checks[d.Refused].Limit
}

func errTooManyChecks(n int) error {
	return fmt.Errorf("ratelimit: %d checks in one decision; at most %d", n, MaxChecks)
}
