// Package upstream calls a provider: it retries what is worth retrying (429, 5xx, a connection
// that failed) with the provider's retry-after or exponential backoff with full jitter, never
// retries what a retry cannot fix (400, 401, 403, 404, 422), and reports each throttle so the
// gateway can slow down. Anthropic's 529 (overloaded_error), its capacity spent for the moment
// rather than the account's limits, is retried with full jitter whatever its retry-after says,
// so that the calls it turned away do not come back at once, and is no throttle.
package upstream

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Options configures a Transport.
type Options struct {
	// MaxAttempts is the most attempts per call, the first included. Values below 1 mean 1.
	MaxAttempts int
	// BaseDelay and MaxDelay bound the backoff: before attempt n+1 the Transport waits a random
	// time between zero and min(MaxDelay, BaseDelay × 2^(n-1)). A provider's retry-after longer
	// than MaxDelay is not waited for: the call fails with the provider's answer.
	BaseDelay, MaxDelay time.Duration
	// Throttled is told of every 429 and 503 with the provider's retry-after (zero if it sent
	// none). Nil means nobody is told.
	Throttled func(status int, retryAfter time.Duration)
	// Attempted is told of every attempt's result: the status, or 0 and the error for an attempt
	// that got no answer. Nil means nobody is told.
	Attempted func(status int, err error)
	// Unreachable is told of each retry whose previous attempt failed to connect, before it is
	// sent, and may point it elsewhere, as to another of a provider's Pods. Nil means every
	// attempt goes where the first went.
	Unreachable func(retry *http.Request)
	// Sleep waits d or until ctx ends. Nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a random number in [0, 1). Nil means math/rand/v2.
	Jitter func() float64
}

// Transport is an http.RoundTripper that retries a provider's calls. A request it retries must
// have GetBody, as http.NewRequest sets it for a body in memory. It is safe for
// concurrent use.
type Transport struct {
	base http.RoundTripper
	opts Options
}

// New returns a Transport that sends each attempt through base.
func New(base http.RoundTripper, opts Options) *Transport {
	opts.MaxAttempts = max(opts.MaxAttempts, 1)
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	return &Transport{base: base, opts: opts}
}

// RoundTrip sends the request, again while the answer is worth retrying and attempts remain.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(req)
		t.report(resp, err)
		delay, retry := t.retryAfter(resp, err, attempt)
		if !retry || req.GetBody == nil {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if err := t.opts.Sleep(req.Context(), delay); err != nil {
			return nil, err
		}
		body, bodyErr := req.GetBody()
		if bodyErr != nil {
			return nil, bodyErr
		}
		req = req.Clone(req.Context())
		req.Body = body
		if err != nil && t.opts.Unreachable != nil {
			t.opts.Unreachable(req)
		}
	}
}

func (t *Transport) report(resp *http.Response, err error) {
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	if t.opts.Attempted != nil {
		t.opts.Attempted(status, err)
	}
	if t.opts.Throttled != nil && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		t.opts.Throttled(status, RetryAfter(resp.Header))
	}
}

// retryAfter says whether to try again after this attempt, and after how long.
func (t *Transport) retryAfter(resp *http.Response, err error, attempt int) (time.Duration, bool) {
	if attempt >= t.opts.MaxAttempts || !Retryable(resp, err) {
		return 0, false
	}
	if resp != nil && resp.StatusCode != StatusOverloaded {
		if d := RetryAfter(resp.Header); d > 0 {
			return d, d <= t.opts.MaxDelay
		}
	}
	return t.backoff(attempt), true
}

// backoff is full jitter: a random time between zero and the attempt's ceiling.
func (t *Transport) backoff(attempt int) time.Duration {
	ceiling := t.opts.MaxDelay
	if shift := attempt - 1; shift < 32 && t.opts.BaseDelay<<shift < ceiling && t.opts.BaseDelay<<shift > 0 {
		ceiling = t.opts.BaseDelay << shift
	}
	return time.Duration(t.opts.Jitter() * float64(ceiling))
}

// StatusOverloaded is Anthropic's 529 overloaded_error.
const StatusOverloaded = 529

// Retryable reports whether an attempt's result is worth another try: a 429, a 5xx or a failed
// connection. A canceled or expired request is not.
func Retryable(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
}

// RetryAfter reads a provider's retry-after-ms, or retry-after in seconds or as an HTTP date.
// It returns zero when there is none.
func RetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0)
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
