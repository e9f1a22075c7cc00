package ramp

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

const s = time.Second

// threeDollars is $3 per million tokens in and out: 2,400 micro-dollars
// for a page of 600 + 200 tokens.
var threeDollars = gatewayv1.Prices{InputPerMillion: "3", OutputPerMillion: "3"}

// served is a page of 600 + 200 tokens served between sent and answered.
func served(user, index int, sent, answered time.Duration) page {
	return page{user: user, index: index, sent: sent, answered: answered, cause: Served, promptTokens: 600, completionTokens: 200}
}

// failed is a page sent and answered at at, for cause.
func failed(user, index int, at time.Duration, cause Cause) page {
	return page{user: user, index: index, sent: at, answered: at, cause: cause}
}

// ok and refusedCall are calls of 800 tokens as the provider saw them.
func ok(at time.Duration) call                      { return call{at: at, status: 200, tokens: 800} }
func refusedCall(at time.Duration, status int) call { return call{at: at, status: status, tokens: 800} }

func TestSummarize(t *testing.T) {
	ramp := schedule{users: []int{1, 2, 3}, step: 3 * s}
	tests := []struct {
		name string
		run  caseRun
		want CaseReport
	}{{
		name: "every page served",
		run: caseRun{
			name: "sequential", schedule: ramp, elapsed: 10 * s, tokensPerMinute: 10_000, prices: threeDollars,
			pages: []page{served(0, 0, 0, 2*s), served(0, 1, 2*s, 4*s), served(1, 0, 3*s, 5*s), served(1, 1, 5*s, 8*s)},
			calls: []call{ok(0), ok(2 * s), ok(3 * s), ok(5 * s)},
			stats: provider.Stats{Accepted: 4, MicroDollars: 9600},
		},
		want: CaseReport{
			Case: "sequential", ElapsedSeconds: 10, Books: 2, CleanBooks: 2, Pages: 4,
			Outcomes: map[Cause]int{Served: 4},
			Billed:   "0.0096", BilledForBrokenBooks: "0",
			WaitP50Seconds: 2, WaitP95Seconds: 3,
			PeakTokensPerMinute: 3200, PeakTokensShare: 0.32,
			Provider: provider.Stats{Accepted: 4, MicroDollars: 9600},
		},
	}, {
		name: "a burst breaks at the provider, and the pages served of broken books are wasted",
		run: caseRun{
			name: "burst", schedule: ramp, elapsed: 9 * s, tokensPerMinute: 10_000, prices: threeDollars,
			pages: []page{
				served(0, 0, 0, 2*s), served(0, 1, 0, 2*s),
				served(1, 0, 3*s, 5*s), failed(1, 1, 3*s+time.Millisecond, ProviderOverloaded),
				failed(2, 0, 6*s, ProviderTokens), served(2, 1, 6*s, 9*s),
			},
			calls: []call{ok(0), ok(0), ok(3 * s), refusedCall(3*s, 503), refusedCall(6*s, 429), ok(6 * s)},
			stats: provider.Stats{Accepted: 4, Rejected503: 1, Rejected429Tokens: 1, MicroDollars: 9600},
		},
		want: CaseReport{
			Case: "burst", ElapsedSeconds: 9, Books: 3, CleanBooks: 1, BrokenBooks: 2, Pages: 6,
			Outcomes:       map[Cause]int{Served: 4, ProviderOverloaded: 1, ProviderTokens: 1},
			DiedAtProvider: 2,
			FirstFailure:   &Failure{Users: 2, AtSeconds: 3.001, Cause: ProviderOverloaded},
			Billed:         "0.0096", BilledForBrokenBooks: "0.0048",
			WaitP50Seconds: 2, WaitP95Seconds: 3,
			PeakTokensPerMinute: 3200, PeakTokensShare: 0.32,
			Provider: provider.Stats{Accepted: 4, Rejected503: 1, Rejected429Tokens: 1, MicroDollars: 9600},
		},
	}, {
		name: "a gateway asked to queue that refuses says so",
		run: caseRun{
			name: "queue", queued: true, limit: 10 * time.Minute, capFlag: "--queue-cap", schedule: ramp, elapsed: 3 * s, tokensPerMinute: 10_000, prices: threeDollars,
			pages: []page{served(0, 0, 0, 2*s), failed(0, 1, 0, Refused), failed(0, 2, 0, Busy)},
			calls: []call{ok(0)},
			stats: provider.Stats{Accepted: 1, MicroDollars: 2400},
		},
		want: CaseReport{
			Case: "queue", ElapsedSeconds: 3, Books: 1, BrokenBooks: 1, Pages: 3,
			Outcomes: map[Cause]int{Served: 1, Refused: 1, Busy: 1},
			Refused:  2,
			// The tie at 0 s goes to the lower page.
			FirstFailure: &Failure{Users: 1, AtSeconds: 0, Cause: Refused},
			Billed:       "0.0024", BilledForBrokenBooks: "0.0024",
			WaitP50Seconds: 2, WaitP95Seconds: 2,
			PeakTokensPerMinute: 800, PeakTokensShare: 0.08,
			Provider: provider.Stats{Accepted: 1, MicroDollars: 2400},
			Notes: []string{"the gateway, told to queue, refused 1 page with its own 429 (rate_limit_exceeded) instead: " +
				"for those pages this case measured refusal, not a queue", "ran until its books were done, in 3s (its cap: 10m0s, --queue-cap)"},
		},
	}, {
		name: "pages cut off by the case's end leave books unfinished, not broken",
		run: caseRun{
			name: "pool", schedule: ramp, elapsed: 300 * s, limit: 300 * s, capFlag: "--duration", tokensPerMinute: 10_000, prices: threeDollars,
			pages: []page{served(0, 0, 0, 200*s), failed(0, 1, 300*s, CutOff), failed(1, 0, 300*s, NoAnswer)},
			calls: []call{ok(0), {at: 250 * s, tokens: 800}}, // the second call's client left
			stats: provider.Stats{Accepted: 2, Canceled: 1, MicroDollars: 2400},
		},
		want: CaseReport{
			Case: "pool", ElapsedSeconds: 300, Books: 2, UnfinishedBooks: 1, BrokenBooks: 1, Pages: 3,
			Outcomes:     map[Cause]int{Served: 1, CutOff: 1, NoAnswer: 1},
			FirstFailure: &Failure{Users: 3, AtSeconds: 300, Cause: NoAnswer},
			Billed:       "0.0024", BilledForBrokenBooks: "0",
			WaitP50Seconds: 200, WaitP95Seconds: 200,
			PeakTokensPerMinute: 800, PeakTokensShare: 0.08,
			Provider: provider.Stats{Accepted: 2, Canceled: 1, MicroDollars: 2400},
			Notes: []string{"1 page had no answer when the case stopped at its cap, 5m0s (--duration); Jain's index and the estimate error, measured over whole books, are left out",
				"1 page got no answer: the connection failed"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(tc.run)
			if diff := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(CaseReport{}, "Series", "ProviderErrorShare", "BacklogTokensShare",
				"RefusalsPerPage", "JainOverUsers", "WholeBookP50Seconds", "WholeBookP95Seconds", "EstimateErrorP90",
				"ProviderBoundSeconds", "RampSeconds", "TookOverBound", "ProviderMinuteShares")); diff != "" {
				t.Errorf("summarize mismatch (-got +want):\n%s", diff)
			}
			if tc.want.UnfinishedBooks > 0 && (got.JainOverUsers != 0 || got.EstimateErrorP90 != 0) {
				t.Errorf("a case cut off with books unfinished has Jain %.3f and estimate error %.2f; want neither measured", got.JainOverUsers, got.EstimateErrorP90)
			}
		})
	}
}

func TestSeries(t *testing.T) {
	run := caseRun{
		schedule: schedule{users: []int{1, 2, 3}, step: 3 * s}, // buckets of 1 s
		elapsed:  2500 * time.Millisecond,
		pages: []page{
			served(0, 0, 0, 500*time.Millisecond),
			served(0, 1, 200*time.Millisecond, 1200*time.Millisecond),
			served(0, 2, 800*time.Millisecond, 1800*time.Millisecond),
			failed(0, 3, 1500*time.Millisecond, ProviderTokens), // counted by the provider's calls
			served(1, 0, 2*s, 3*s),                              // answered after the end: the last bucket
		},
		calls: []call{refusedCall(100*time.Millisecond, 429), ok(300 * time.Millisecond), refusedCall(2400*time.Millisecond, 503)},
	}
	want := Series{
		BucketSeconds:  1,
		StepsAtSeconds: []float64{0, 3, 6},
		Points: []Point{
			{AtSeconds: 0, PagesPerSecond: 1, ProviderErrorsPerSecond: 1, MeanWaitSeconds: 0.5, UserPagesLeast: 1, UserPagesMedian: 1, UserPagesMost: 1},
			{AtSeconds: 1, PagesPerSecond: 2, MeanWaitSeconds: 1, UserPagesLeast: 3, UserPagesMedian: 3, UserPagesMost: 3},
			// User 1, who started at 2 s, was served its page after the end: the last bucket.
			{AtSeconds: 2, PagesPerSecond: 1, ProviderErrorsPerSecond: 1, MeanWaitSeconds: 1, UserPagesLeast: 1, UserPagesMedian: 1, UserPagesMost: 3},
		},
	}
	if diff := cmp.Diff(seriesOf(run), want); diff != "" {
		t.Errorf("seriesOf mismatch (-got +want):\n%s", diff)
	}
}

func TestBucketFor(t *testing.T) {
	tests := []struct{ step, want time.Duration }{
		{step: 3 * s, want: s},
		{step: 10 * s, want: s},
		{step: 600 * time.Millisecond, want: 200 * time.Millisecond},
		{step: 100 * time.Millisecond, want: 100 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := bucketFor(tc.step); got != tc.want {
			t.Errorf("bucketFor(%s) = %s; want %s", tc.step, got, tc.want)
		}
	}
}

func TestPeakPerMinute(t *testing.T) {
	tests := []struct {
		name  string
		calls []call
		want  int64
	}{
		{name: "nothing", want: 0},
		{name: "a call leaves the minute exactly 60 s after it came",
			calls: []call{ok(0), ok(30 * s), ok(60 * s)}, want: 1600},
		{name: "a call just inside the minute still counts",
			calls: []call{ok(0), ok(30 * s), ok(60*s - time.Millisecond)}, want: 2400},
		{name: "refused calls count nothing; a call whose client left counts",
			calls: []call{refusedCall(0, 429), refusedCall(0, 503), {at: s, tokens: 500}, ok(2 * s)}, want: 1300},
		{name: "calls in any order",
			calls: []call{ok(100 * s), ok(0), ok(70 * s), ok(50 * s)}, want: 2400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := peakPerMinute(tc.calls); got != tc.want {
				t.Errorf("peakPerMinute = %d; want %d", got, tc.want)
			}
		})
	}
}

func TestUsersAt(t *testing.T) {
	ramp := schedule{users: []int{1, 2, 5}, step: 3 * s}
	tests := []struct {
		at   time.Duration
		want int
	}{
		{at: -s, want: 0},
		{at: 0, want: 1},
		{at: 3*s - time.Nanosecond, want: 1},
		{at: 3 * s, want: 2},
		{at: 6 * s, want: 5},
		{at: time.Hour, want: 5},
	}
	for _, tc := range tests {
		if got := ramp.usersAt(tc.at); got != tc.want {
			t.Errorf("usersAt(%s) = %d; want %d", tc.at, got, tc.want)
		}
	}
}

// TestPoolReport counts what each account of the failover case's pool served around the outage
// of the first: by when each call came, the calls the outage cut, and the refusals.
func TestPoolReport(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	seen := func(from, took float64, status int) seenCall {
		return seenCall{at: at(from), took: time.Duration(took * float64(time.Second)), status: status, tokens: 800}
	}
	big := &account{name: "lab", rec: &recorder{seen: []seenCall{
		seen(1, 2, http.StatusOK),  // before
		seen(29, 2, 0),             // cut by the outage at 30 s
		seen(61, 2, http.StatusOK), // after
		seen(62, 0, http.StatusTooManyRequests),
	}}, down: at(30), up: at(60)}
	big.opts.RequestsPerMinute = 1500
	small := &account{name: "lab-small", rec: &recorder{seen: []seenCall{
		seen(10, 2, http.StatusOK), seen(40, 2, http.StatusOK), seen(45, 2, http.StatusOK), seen(70, 2, http.StatusOK),
	}}}
	small.opts.RequestsPerMinute = 150
	got := poolReport([]*account{big, small}, start)
	want := &PoolReport{DownSeconds: 30, UpSeconds: 60, Providers: []PoolProvider{
		{Name: "lab", RequestsPerMinute: 1500, Served: [3]int{1, 0, 1}, Cut: 1, Refused: 1},
		{Name: "lab-small", RequestsPerMinute: 150, Served: [3]int{1, 2, 1}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("poolReport (-want +got):\n%s", diff)
	}
}
