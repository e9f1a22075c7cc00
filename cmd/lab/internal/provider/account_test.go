package provider

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// step is one call to an account at t0+at: admit tokens, or finish the
// oldest call if release.
type step struct {
	at      time.Duration
	tokens  int64
	release bool
	want    decision
}

// ok, refused and overload build a step's wanted decision; the limits in
// its quota are filled in from the case.
func ok(remRequests, remTokens int64, reset time.Duration) decision {
	return decision{outcome: admitted, quota: quota{remainingRequests: remRequests, remainingTokens: remTokens, reset: reset}}
}

func refused(o outcome, retry time.Duration, remRequests, remTokens int64, reset time.Duration) decision {
	d := ok(remRequests, remTokens, reset)
	d.outcome, d.retryAfter = o, retry
	return d
}

func TestAccountAdmit(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		limits limits
		steps  []step
	}{{
		name:   "requests expire exactly 60 s after they are admitted",
		limits: limits{requests: 2, tokens: 1000, inFlight: 10},
		steps: []step{
			{at: 0, tokens: 10, want: ok(1, 990, time.Minute)},
			{at: 10 * time.Second, tokens: 10, want: ok(0, 980, time.Minute)},
			{at: 30 * time.Second, tokens: 10, want: refused(requestsExhausted, 30*time.Second, 0, 980, 40*time.Second)},
			{at: time.Minute - ms, tokens: 10, want: refused(requestsExhausted, ms, 0, 980, 10*time.Second+ms)},
			{at: time.Minute, tokens: 10, want: ok(0, 980, time.Minute)},
		},
	}, {
		name:   "tokens expire exactly 60 s after they are admitted",
		limits: limits{requests: 100, tokens: 100, inFlight: 10},
		steps: []step{
			{at: 0, tokens: 60, want: ok(99, 40, time.Minute)},
			{at: 20 * time.Second, tokens: 30, want: ok(98, 10, time.Minute)},
			// 40 must expire: the first call's 60, at 60 s.
			{at: 30 * time.Second, tokens: 50, want: refused(tokensExhausted, 30*time.Second, 98, 10, 50*time.Second)},
			{at: 40 * time.Second, tokens: 10, want: ok(97, 0, time.Minute)},
			{at: time.Minute - ms, tokens: 1, want: refused(tokensExhausted, ms, 97, 0, 40*time.Second+ms)},
			{at: time.Minute, tokens: 50, want: ok(97, 10, time.Minute)},
		},
	}, {
		name:   "a wait for tokens counts the calls that must expire",
		limits: limits{requests: 100, tokens: 100, inFlight: 10},
		steps: []step{
			{at: 0, tokens: 40, want: ok(99, 60, time.Minute)},
			{at: 10 * time.Second, tokens: 40, want: ok(98, 20, time.Minute)},
			// 80 must expire: both calls, the second at 70 s.
			{at: 20 * time.Second, tokens: 100, want: refused(tokensExhausted, 50*time.Second, 98, 20, 50*time.Second)},
		},
	}, {
		name:   "a call larger than the minute never fits and gets no retry",
		limits: limits{requests: 100, tokens: 100, inFlight: 10},
		steps: []step{{at: 0, tokens: 101, want: func() decision {
			d := refused(tokensExhausted, 0, 100, 100, 0)
			d.tooLarge = true
			return d
		}()}},
	}, {
		name:   "calls over the in-flight cap are overloaded and not counted",
		limits: limits{requests: 100, tokens: 1000, inFlight: 2},
		steps: []step{
			{at: 0, tokens: 10, want: ok(99, 990, time.Minute)},
			{at: 0, tokens: 10, want: ok(98, 980, time.Minute)},
			{at: time.Second, tokens: 10, want: refused(overloaded, 0, 98, 980, 59*time.Second)},
			{release: true},
			{at: time.Second, tokens: 10, want: ok(97, 970, time.Minute)},
		},
	}, {
		name:   "requests are checked before tokens, and tokens before calls in flight",
		limits: limits{requests: 2, tokens: 10, inFlight: 1},
		steps: []step{
			{at: 0, tokens: 10, want: ok(1, 0, time.Minute)},
			{at: 0, tokens: 1, want: refused(tokensExhausted, time.Minute, 1, 0, time.Minute)},
			{at: 0, tokens: 0, want: refused(overloaded, 0, 1, 0, time.Minute)},
			{at: 0, tokens: 0, release: true},
			{at: 0, tokens: 0, want: ok(0, 0, time.Minute)},
			{at: 0, tokens: 0, want: refused(requestsExhausted, time.Minute, 0, 0, time.Minute)},
		},
	}, {
		name:   "time that jumps backwards counts at the last admission's time",
		limits: limits{requests: 2, tokens: 1000, inFlight: 10},
		steps: []step{
			{at: 10 * time.Second, tokens: 1, want: ok(1, 999, time.Minute)},
			{at: 5 * time.Second, tokens: 1, want: ok(0, 998, 65*time.Second)},
			// Counted at 10 s, the second call is still there at 65 s.
			{at: 65 * time.Second, tokens: 1, want: refused(requestsExhausted, 5*time.Second, 0, 998, 5*time.Second)},
			{at: 70 * time.Second, tokens: 1, want: ok(1, 999, time.Minute)},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := account{limits: tc.limits}
			for i, st := range tc.steps {
				if st.release {
					a.finish(true, 0, 0, 0)
					continue
				}
				got := a.admit(t0.Add(st.at), st.tokens)
				want := st.want
				want.quota.limitRequests, want.quota.limitTokens = tc.limits.requests, tc.limits.tokens
				if diff := cmp.Diff(got, want, cmp.AllowUnexported(decision{}, quota{})); diff != "" {
					t.Errorf("step %d: admit(t0+%v, %d) mismatch (-got +want):\n%s", i, st.at, st.tokens, diff)
				}
			}
		})
	}
}

func TestAccountStats(t *testing.T) {
	a := account{limits: limits{requests: 3, tokens: 100, inFlight: 2}}
	a.admit(t0, 30)                 // accepted
	a.admit(t0, 30)                 // accepted
	a.admit(t0, 30)                 // 503: two in flight
	a.finish(true, 10, 20, 90)      // served and billed
	a.admit(t0, 50)                 // 429 tokens
	a.admit(t0, 101)                // 429 tokens: too large
	a.admit(t0, 30)                 // accepted
	a.finish(false, 10, 20, 90)     // canceled: not billed
	a.admit(t0.Add(time.Second), 1) // 429 requests
	a.admit(t0.Add(time.Minute), 1) // accepted: the minute rolled
	got := a.stats
	want := Stats{
		Accepted:            4,
		Rejected429Requests: 1,
		Rejected429Tokens:   2,
		Rejected503:         1,
		Canceled:            1,
		InFlight:            2,
		MaxInFlightSeen:     2,
		PromptTokens:        10,
		CompletionTokens:    20,
		MicroDollars:        90,
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("stats mismatch (-got +want):\n%s", diff)
	}
}

func TestHeaderValues(t *testing.T) {
	tests := []struct {
		d                 time.Duration
		wantReset         string
		wantRetry, wantMs string
	}{
		{d: 0, wantReset: "0s"},
		{d: time.Nanosecond, wantReset: "1ms", wantRetry: "1", wantMs: "1"},
		{d: 20 * time.Millisecond, wantReset: "20ms", wantRetry: "1", wantMs: "20"},
		{d: 1500 * time.Millisecond, wantReset: "1.5s", wantRetry: "2", wantMs: "1500"},
		{d: 30 * time.Second, wantReset: "30s", wantRetry: "30", wantMs: "30000"},
		{d: time.Minute - time.Microsecond, wantReset: "1m0s", wantRetry: "60", wantMs: "60000"},
		{d: 6 * time.Minute, wantReset: "6m0s", wantRetry: "360", wantMs: "360000"},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			h := http.Header{}
			setRetry(h, tc.d)
			got := []string{resetString(tc.d), h.Get("retry-after"), h.Get("retry-after-ms")}
			want := []string{tc.wantReset, tc.wantRetry, tc.wantMs}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("reset, retry-after, retry-after-ms mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestLatency(t *testing.T) {
	tests := []struct {
		name     string
		mean, sd time.Duration
		z        float64
		want     time.Duration
	}{
		{name: "mean", mean: 2 * time.Second, sd: 300 * time.Millisecond, z: 0, want: 2 * time.Second},
		{name: "one deviation up", mean: 2 * time.Second, sd: 300 * time.Millisecond, z: 1, want: 2300 * time.Millisecond},
		{name: "two deviations down", mean: 2 * time.Second, sd: 300 * time.Millisecond, z: -2, want: 1400 * time.Millisecond},
		{name: "clamped at zero", mean: time.Second, sd: time.Second, z: -3, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := jitter(tc.mean, tc.sd, tc.z); got != tc.want {
				t.Errorf("jitter(%v, %v, %v) = %v; want %v", tc.mean, tc.sd, tc.z, got, tc.want)
			}
		})
	}
}

func TestPartsAddUp(t *testing.T) {
	tests := []struct {
		d time.Duration
		n int
	}{{2 * time.Second, 1}, {2 * time.Second, 3}, {time.Second + 7, 13}, {0, 4}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v in %d", tc.d, tc.n), func(t *testing.T) {
			var got time.Duration
			for i := range tc.n {
				got += part(tc.d, i, tc.n)
			}
			if got != tc.d {
				t.Errorf("sum of parts = %v; want %v", got, tc.d)
			}
		})
	}
}

func TestCost(t *testing.T) {
	tests := []struct {
		name               string
		in, out            int64
		prompt, completion int64
		want               int64
	}{
		{name: "a page at $3 per million", in: 3_000_000, out: 3_000_000, prompt: 600, completion: 200, want: 2400},
		{name: "a fraction of a micro-dollar rounds up", in: 150_000, out: 600_000, prompt: 1, completion: 1, want: 1},
		{name: "free", prompt: 1000, completion: 1000, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{InputMicrosPerMillion: tc.in, OutputMicrosPerMillion: tc.out}
			if got := cost(o, tc.prompt, tc.completion); got != tc.want {
				t.Errorf("cost(%d, %d) = %d; want %d", tc.prompt, tc.completion, got, tc.want)
			}
		})
	}
}
