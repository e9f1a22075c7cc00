package v1

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckRate reports whether the gateway's limiter can hold a token bucket
// that earns rate units every per, up to burst units: each must be positive,
// a unit must take at least a nanosecond to earn back, and a full bucket
// must refill within the limiter's arithmetic. The limiter's constructor
// (ratelimit.NewBucket) calls it, and so does Validate, so that a
// configuration that validates also compiles.
func CheckRate(rate int64, per time.Duration, burst int64) error {
	if rate <= 0 || per <= 0 || burst <= 0 {
		return fmt.Errorf("rate %d per %s with burst %d must all be positive", rate, per, burst)
	}
	interval := per / time.Duration(rate)
	if interval <= 0 {
		return fmt.Errorf("rate %d per %s is finer than the limiter can hold (one unit a nanosecond)", rate, per)
	}
	if burst > math.MaxInt64/4/int64(interval) {
		return fmt.Errorf("burst %d at %s a unit takes too long to refill", burst, interval)
	}
	return nil
}

// The most a rolling window counts: capacity units in at most MaxRollingSlots slots. The Redis
// script counts in double-precision numbers, exact up to 2^53, and a slot may hold up to four
// capacities (what a settlement too large to be real is held to), so slots+1 such slots must sum
// below 2^53. 2^40 micro-dollars is about $1.1M a minute; 2^40 tokens, a trillion.
const (
	MaxRollingCapacity = 1 << 40
	MaxRollingSlots    = 1000
)

// CheckRolling reports whether the gateway's limiter can hold a rolling window of capacity units
// in any span of period, counted in slots: capacity and slots positive and within
// MaxRollingCapacity and MaxRollingSlots, and a slot a whole number of microseconds (the Redis
// script's unit). The limiter's constructor (ratelimit.NewRolling) calls it, and so does
// Validate, so that a configuration that validates also compiles.
func CheckRolling(capacity int64, period time.Duration, slots int64) error {
	if capacity <= 0 || capacity > MaxRollingCapacity {
		return fmt.Errorf("%d in a rolling %s must be positive and at most %d", capacity, period, int64(MaxRollingCapacity))
	}
	if slots <= 0 || slots > MaxRollingSlots {
		return fmt.Errorf("a rolling window's %d slots must be positive and at most %d", slots, MaxRollingSlots)
	}
	if period <= 0 || period%(time.Duration(slots)*time.Microsecond) != 0 {
		return fmt.Errorf("a rolling %s in %d slots must make slots of whole microseconds", period, slots)
	}
	return nil
}

// ProviderMinuteSlots is how many slots a provider's per-minute limits are counted in: a second
// each. While a backlog lasts, a rolling window lets through slots/(slots+1) of its capacity,
// 60/61 of the limit; its pace (ProviderPace) a second less.
const ProviderMinuteSlots = 60

// ProviderPace sizes the bucket that paces a provider's per-minute limit n beside its rolling
// minute: a burst of a second of n, at least minBurst (but no more than n) and at least 1,
// refilled at n × 59/61 a minute (at least 1), a second of n less than the rolling minute lets
// through while a backlog lasts (60/61). A call larger than the burst, up to n, passes when the
// bucket is full, into debt. A burst that goes at once is still counted by the rolling minute a
// minute later; larger than the second the pace leaves the rolling minute, it makes the rolling
// minute hold the backlog then, while the bucket fills and lets the burst go again, a second less
// each minute: the backlog drains in swings nobody waiting can foresee. A second's burst never
// fills the rolling minute, so a backlog drains at the pace, evenly.
func ProviderPace(n, minBurst int64) (rate, burst int64) {
	rate = max(n*(ProviderMinuteSlots-1)/(ProviderMinuteSlots+1), 1)
	burst = max(n/ProviderMinuteSlots, min(n, minBurst), 1)
	return rate, burst
}

// MinTokenBurst is the least burst of a provider's tokens per minute (all of them, its input's or
// its output's): a few typical calls, so that a few calls to a small provider go together.
const MinTokenBurst = 4096

// ProviderMinBurst is the least burst of a provider's per-minute limit of d: MinTokenBurst for
// tokens of any kind, none for requests.
func ProviderMinBurst(d Dimension) int64 {
	if d == DimensionRequests {
		return 0
	}
	return MinTokenBurst
}

// validateProviderRates checks that the limiter can hold each of the provider's per-minute
// limits after headroom, as rolling windows of a minute paced by buckets.
func (pr *Provider) validateProviderRates(paths ProviderPaths) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, value any, n, minBurst int64) {
		if n <= 0 {
			return
		}
		err := CheckRolling(n, time.Minute, ProviderMinuteSlots)
		if err == nil {
			rate, _ := ProviderPace(n, minBurst)
			err = CheckRate(rate, time.Minute, n) // the pace's largest call, n, bounds its burst too
		}
		if err != nil {
			errs = append(errs, field.Invalid(p, value, "must fit the gateway's limiter: "+err.Error()))
		}
	}
	check(paths.RequestsPerMinute, pr.RequestsPerMinute, pr.WithHeadroom(pr.RequestsPerMinute), 0)
	check(paths.TokensPerMinute, pr.TokensPerMinute, pr.WithHeadroom(pr.TokensPerMinute), MinTokenBurst)
	for i, l := range pr.Limits {
		if l.Per == PeriodMinute {
			check(paths.Limit(i, l).Child("amount"), l.Amount, pr.WithHeadroom(l.Amount), ProviderMinBurst(l.Dimension))
		}
	}
	if micros, err := pr.SpendPerMinute.MicroDollars(); err == nil {
		check(paths.SpendPerMinute, pr.SpendPerMinute, micros, 0)
	}
	return errs
}

// validateRate checks that the limiter can hold a rate limit's bucket.
func (l *Limit) validateRate(p *field.Path) field.ErrorList {
	if l.Per.IsCalendar() || l.Per.Duration() == 0 {
		return nil
	}
	amount := l.Amount
	if l.Dimension == DimensionDollars {
		micros, err := l.Dollars.MicroDollars()
		if err != nil {
			return nil // validateAmount says why
		}
		amount = micros
	}
	if amount <= 0 || l.Burst < 0 {
		return nil
	}
	if err := CheckRate(amount, l.Per.Duration(), cmp.Or(l.Burst, amount)); err != nil {
		return field.ErrorList{field.Invalid(p, l.Per, "must fit the gateway's limiter: "+err.Error())}
	}
	return nil
}
