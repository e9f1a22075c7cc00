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

// PerMinuteBucket sizes the bucket of a provider's per-minute limit n: a
// burst of n/fraction (at least minBurst, but at most half of n, and at
// least 1) refilling at n less the burst, so that no rolling minute passes
// n. The gateway builds a provider's limits with it, and Validate checks
// what it returns.
func PerMinuteBucket(n, fraction, minBurst int64) (rate, burst int64) {
	burst = max(n/fraction, 1)
	if minBurst > 0 {
		burst = max(burst, min(n/2, minBurst))
	}
	return max(n-burst, 1), burst
}

// The fractions of a provider's per-minute limits its bucket bursts hold:
// one second of requests, six seconds of tokens and dollars. A tokens
// bucket holds at least MinTokenBurst, since its burst is also the largest
// call that can pass.
const (
	RequestsBurstFraction = 60
	SpendBurstFraction    = 10
	TokensBurstFraction   = 10
	MinTokenBurst         = 16384
)

// validateProviderRates checks that the limiter can hold each of the
// provider's per-minute limits after headroom.
func (pr *Provider) validateProviderRates(paths ProviderPaths) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, value any, n, fraction, minBurst int64) {
		if n <= 0 {
			return
		}
		rate, burst := PerMinuteBucket(n, fraction, minBurst)
		if err := CheckRate(rate, time.Minute, burst); err != nil {
			errs = append(errs, field.Invalid(p, value, "must fit the gateway's limiter: "+err.Error()))
		}
	}
	check(paths.RequestsPerMinute, pr.RequestsPerMinute, pr.WithHeadroom(pr.RequestsPerMinute), RequestsBurstFraction, 0)
	check(paths.TokensPerMinute, pr.TokensPerMinute, pr.WithHeadroom(pr.TokensPerMinute), TokensBurstFraction, MinTokenBurst)
	if micros, err := pr.SpendPerMinute.MicroDollars(); err == nil {
		check(paths.SpendPerMinute, pr.SpendPerMinute, micros, SpendBurstFraction, 0)
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
