package provider

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

// perMinute are limits of requests and tokens a minute and calls in
// flight, and none on input and output tokens or on requests a day.
func perMinute(requests, tokens, inFlight int64) limits {
	return limits{requests: requests, tokens: counts{allTokens: tokens}, inFlight: inFlight}
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
		limits: perMinute(2, 1000, 10),
		steps: []step{
			{at: 0, tokens: 10, want: ok(1, 990, time.Minute)},
			{at: 10 * time.Second, tokens: 10, want: ok(0, 980, time.Minute)},
			{at: 30 * time.Second, tokens: 10, want: refused(requestsExhausted, 30*time.Second, 0, 980, 40*time.Second)},
			{at: time.Minute - ms, tokens: 10, want: refused(requestsExhausted, ms, 0, 980, 10*time.Second+ms)},
			{at: time.Minute, tokens: 10, want: ok(0, 980, time.Minute)},
		},
	}, {
		name:   "tokens expire exactly 60 s after they are admitted",
		limits: perMinute(100, 100, 10),
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
		limits: perMinute(100, 100, 10),
		steps: []step{
			{at: 0, tokens: 40, want: ok(99, 60, time.Minute)},
			{at: 10 * time.Second, tokens: 40, want: ok(98, 20, time.Minute)},
			// 80 must expire: both calls, the second at 70 s.
			{at: 20 * time.Second, tokens: 100, want: refused(tokensExhausted, 50*time.Second, 98, 20, 50*time.Second)},
		},
	}, {
		name:   "a call larger than the minute never fits and gets no retry",
		limits: perMinute(100, 100, 10),
		steps: []step{{at: 0, tokens: 101, want: func() decision {
			d := refused(tokensExhausted, 0, 100, 100, 0)
			d.tooLarge = true
			return d
		}()}},
	}, {
		name:   "calls over the in-flight cap are overloaded and not counted",
		limits: perMinute(100, 1000, 2),
		steps: []step{
			{at: 0, tokens: 10, want: ok(99, 990, time.Minute)},
			{at: 0, tokens: 10, want: ok(98, 980, time.Minute)},
			{at: time.Second, tokens: 10, want: refused(overloaded, 0, 98, 980, 59*time.Second)},
			{release: true},
			{at: time.Second, tokens: 10, want: ok(97, 970, time.Minute)},
		},
	}, {
		name:   "requests are checked before tokens, and tokens before calls in flight",
		limits: perMinute(2, 10, 1),
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
		limits: perMinute(2, 1000, 10),
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
					a.finish(0, "", true, Bill{})
					continue
				}
				got := a.admit(t0.Add(st.at), counts{allTokens: st.tokens})
				want := st.want
				want.quota.limitRequests, want.quota.limitTokens = tc.limits.requests, tc.limits.tokens[allTokens]
				if diff := cmp.Diff(got, want, cmp.AllowUnexported(decision{}, quota{}, tokenQuota{}), cmpopts.IgnoreFields(decision{}, "asked", "seq")); diff != "" {
					t.Errorf("step %d: admit(t0+%v, %d) mismatch (-got +want):\n%s", i, st.at, st.tokens, diff)
				}
			}
		})
	}
}

func TestAccountStats(t *testing.T) {
	a := account{limits: limits{requests: 4, perDay: 5, tokens: counts{100, 60, 40}, inFlight: 2}}
	tokens := func(n int64) counts { return counts{allTokens: n} }
	served := Bill{InputTokens: 10, CachedInputTokens: 4, AudioInputTokens: 3, OutputTokens: 20, ReasoningTokens: 5, AudioOutputTokens: 6, MicroDollars: 90}
	a.admit(t0, tokens(30))                             // accepted
	a.admit(t0, tokens(30))                             // accepted
	a.admit(t0, tokens(30))                             // 503: two in flight
	a.finish(0, "flex", true, served)                   // served and billed
	a.admit(t0, tokens(50))                             // 429 tokens
	a.admit(t0, tokens(101))                            // 429 tokens: too large
	a.admit(t0, counts{inputTokens: 61})                // 429 input tokens: too large
	a.admit(t0, counts{outputTokens: 41})               // 429 output tokens: too large
	a.admit(t0, tokens(30))                             // accepted
	a.finish(1, "", false, served)                      // canceled: not billed
	a.admit(t0, tokens(1))                              // accepted
	a.admit(t0.Add(time.Second), tokens(1))             // 429 requests
	a.finish(2, "priority", true, served)               // served and billed
	a.admit(t0.Add(time.Minute), tokens(1))             // accepted: the minute rolled
	a.admit(t0.Add(time.Minute+time.Second), tokens(1)) // 429 requests per day
	got := a.stats
	want := Stats{
		Accepted:                  5,
		Rejected429Requests:       1,
		Rejected429RequestsPerDay: 1,
		Rejected429Tokens:         2,
		Rejected429InputTokens:    1,
		Rejected429OutputTokens:   1,
		Rejected503:               1,
		Canceled:                  1,
		InFlight:                  2,
		MaxInFlightSeen:           2,
		PromptTokens:              20,
		CachedPromptTokens:        8,
		AudioPromptTokens:         6,
		CompletionTokens:          40,
		ReasoningTokens:           10,
		AudioCompletionTokens:     12,
		MicroDollars:              180,
		Tiers:                     TierBills{Flex: served, Priority: served},
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

func TestAccountInputAndOutput(t *testing.T) {
	a := account{limits: limits{requests: 100, tokens: counts{allTokens: 1_000_000, inputTokens: 100, outputTokens: 1000}, inFlight: 10}}
	type step struct {
		at     time.Duration
		asked  counts
		finish int   // ends the call admitted at that step, if not -1
		made   int64 // its output
		want   outcome
		retry  time.Duration
		large  bool
		input  tokenQuota // after the step
		output tokenQuota
	}
	q := func(limit, remaining int64, resetAt time.Duration) tokenQuota {
		return tokenQuota{limit: limit, remaining: remaining, resetAt: t0.Add(resetAt)}
	}
	steps := []step{
		{asked: counts{inputTokens: 60, outputTokens: 900}, finish: -1, input: q(100, 40, time.Minute), output: q(1000, 100, time.Minute)},
		// The output counts at its cap until the call ends with what it made.
		{at: 10 * time.Second, asked: counts{outputTokens: 900}, finish: -1, want: outputExhausted, retry: 50 * time.Second,
			input: q(100, 40, time.Minute), output: q(1000, 100, time.Minute)},
		{at: 10 * time.Second, finish: 0, made: 100},
		{at: 10 * time.Second, asked: counts{outputTokens: 900}, finish: -1, input: q(100, 40, time.Minute), output: q(1000, 0, 70*time.Second)},
		{at: 20 * time.Second, asked: counts{inputTokens: 41}, finish: -1, want: inputExhausted, retry: 40 * time.Second,
			input: q(100, 40, time.Minute), output: q(1000, 0, 70*time.Second)},
		{at: 20 * time.Second, asked: counts{inputTokens: 101}, finish: -1, want: inputExhausted, large: true,
			input: q(100, 40, time.Minute), output: q(1000, 0, 70*time.Second)},
		{at: 20 * time.Second, asked: counts{outputTokens: 1001}, finish: -1, want: outputExhausted, large: true,
			input: q(100, 40, time.Minute), output: q(1000, 0, 70*time.Second)},
		// A call whose client left made nothing that counts.
		{at: 30 * time.Second, finish: 3, made: -1},
		{at: 30 * time.Second, asked: counts{inputTokens: 40, outputTokens: 900}, finish: -1, input: q(100, 0, 90*time.Second), output: q(1000, 0, 90*time.Second)},
		{at: time.Minute, asked: counts{inputTokens: 60}, finish: -1, input: q(100, 0, 120*time.Second), output: q(1000, 100, 90*time.Second)},
	}
	seqs := map[int]uint64{}
	for i, st := range steps {
		now := t0.Add(st.at)
		if st.finish >= 0 {
			a.finish(seqs[st.finish], "", st.made >= 0, Bill{OutputTokens: max(st.made, 0)})
			continue
		}
		d := a.admit(now, st.asked)
		seqs[i] = d.seq
		got := []any{d.outcome, d.retryAfter, d.tooLarge, d.quota.input, d.quota.output}
		want := []any{st.want, st.retry, st.large, st.input, st.output}
		if diff := cmp.Diff(got, want, cmp.AllowUnexported(tokenQuota{})); diff != "" {
			t.Errorf("step %d: outcome, retry, too large, input and output quota mismatch (-got +want):\n%s", i, diff)
		}
	}
}

func TestAccountNoLimitsApart(t *testing.T) {
	a := account{limits: perMinute(10, 1000, 10)}
	d := a.admit(t0, counts{allTokens: 500, inputTokens: 1_000_000, outputTokens: 1_000_000})
	if d.outcome != admitted || d.quota.input != (tokenQuota{}) || d.quota.output != (tokenQuota{}) {
		t.Errorf("admit() = %+v; want admitted, with no input or output quota", d)
	}
}
