package ramp

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// queued is a page of user served at answered that queued from queued to dispatched, the door
// having estimated estimated.
func queued(user int, queuedAt, dispatched, estimated, answered time.Duration) page {
	p := served(user, 0, queuedAt, answered)
	p.door = door{queued: queuedAt, dispatched: dispatched, estimated: estimated}
	return p
}

func TestFigures(t *testing.T) {
	busyOnce := failed(2, 0, 4*s, Busy)
	busyOnce.busy = 1
	run := caseRun{
		tokensPerMinute: 48_000,                                    // 800 a second
		schedule:        schedule{users: []int{1, 3}, step: 1 * s}, // the last users arrive at 1 s
		pages: []page{
			queued(0, 0, 4*s, 2*s, 4*s),                     // twice the estimate, before the last users arrived: 100%
			queued(1, 1*s, 5*s, 3200*time.Millisecond, 7*s), // 4 s against 3.2 s, after: 25%
			served(0, 1, 0, 3*s),                            // did not queue
			busyOnce,                                        // turned away twice: once came back, then refused
		},
		calls: []call{ok(0), ok(1 * s), ok(2 * s), ok(5 * s), refusedCall(6*s, 429)},
	}
	cr := CaseReport{}
	figures(&cr, run)
	want := CaseReport{
		ProviderErrorShare: 0.2,
		// Queued from 0 to 5 s, when the provider allows 4,000 tokens: it admitted 4 calls of 800
		// from 0 to 5 s, the one at 5 s excluded.
		BacklogTokensShare: 3 * 800.0 / 4000,
		RefusalsPerPage:    0.5,
		// Users 0, 1 and 2 were served 2, 1 and 0 pages.
		JainOverUsers:       9.0 / (3 * 5),
		WholeBookP50Seconds: 4, // user 0's book, whole from 0 to 4 s; user 1's, from 1 to 7 s
		WholeBookP95Seconds: 6,
		EstimateErrorP90:    1,
		// Of the pages queued from 1 s on, user 1's only.
		EstimateErrorP90AfterArrivals: 0.25,
		RampSeconds:                   1,
		DoorWaits: []DoorWait{ // the pages that queued with an estimate, in the order they queued
			{User: 0, QueuedSeconds: 0, WaitedSeconds: 4, EstimatedSeconds: 2},
			{User: 1, QueuedSeconds: 1, WaitedSeconds: 4, EstimatedSeconds: 3.2},
		},
	}
	if diff := cmp.Diff(cr, want); diff != "" {
		t.Errorf("figures mismatch (-got +want):\n%s", diff)
	}
}

func TestJain(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 1},
		{[]float64{0, 0}, 1},
		{[]float64{5, 5, 5}, 1},
		{[]float64{4, 0, 0, 0}, 0.25},
	}
	for _, tc := range tests {
		if got := jain(tc.xs); got != tc.want {
			t.Errorf("jain(%v) = %v; want %v", tc.xs, got, tc.want)
		}
	}
}

// TestTheCrowdAgainstTheProvidersBound checks the provider's own bound, the tokens it served over
// its tokens a minute, and its tokens minute by minute, the last minute over its own length.
func TestTheCrowdAgainstTheProvidersBound(t *testing.T) {
	run := caseRun{
		tokensPerMinute: 2400, // three calls of 800 a minute
		schedule:        schedule{users: []int{1, 2, 4}, step: 3 * s},
		elapsed:         150 * s, // two minutes and a half
		stats:           provider.Stats{PromptTokens: 3000, CompletionTokens: 1000},
		calls: []call{
			ok(0), ok(10 * s), ok(59 * s), // the first minute, full
			refusedCall(60*s, 429), ok(61 * s), // the second, a third full
			ok(125 * s), ok(149 * s), // the last half minute, which allows 1,200
		},
	}
	cr := CaseReport{}
	boundFigures(&cr, run)
	want := CaseReport{
		ProviderBoundSeconds: 100, // 4,000 tokens at 2,400 a minute
		RampSeconds:          6,
		TookOverBound:        1.5,
		ProviderMinuteShares: []float64{1, 1.0 / 3, 1600.0 / 1200},
	}
	if diff := cmp.Diff(cr, want, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("boundFigures mismatch (-got +want):\n%s", diff)
	}
}

// TestTheProvidersBoundAtItsCallsInFlight checks the provider's bound when its calls in flight
// hold it back before its tokens a minute do: the time its served calls took over the calls it
// allows at once; a call it refused took none of it.
func TestTheProvidersBoundAtItsCallsInFlight(t *testing.T) {
	served := func(took time.Duration) call { return call{status: 200, tokens: 800, took: took} }
	run := caseRun{
		tokensPerMinute: 240_000, maxInFlight: 2, // 3,200 tokens take under a second of it
		stats: provider.Stats{PromptTokens: 3000, CompletionTokens: 200},
		calls: []call{served(4 * s), served(6 * s), served(3 * s), served(7 * s), {status: 503, took: 9 * s}},
	}
	if got, want := providerBound(run), 10*s; got != want {
		t.Errorf("the bound at two calls in flight = %s; want %s, 20 s of calls two at a time", got, want)
	}
	run.maxInFlight = 0
	if got, want := providerBound(run), 800*time.Millisecond; got != want {
		t.Errorf("the bound with no calls in flight limited = %s; want %s, the tokens'", got, want)
	}
}

func TestMinuteShares(t *testing.T) {
	tests := []struct {
		name            string
		elapsed         time.Duration
		tokensPerMinute int64
		want            []float64
	}{
		{name: "a case that took no time", elapsed: 0, tokensPerMinute: 2400},
		{name: "a provider without a limit", elapsed: 90 * s},
		{name: "a case of under a minute, over its own length", elapsed: 30 * s, tokensPerMinute: 3200, want: []float64{0.5}},
		{name: "a case of exactly a minute", elapsed: 60 * s, tokensPerMinute: 1600, want: []float64{0.5}},
	}
	calls := []call{ok(0), refusedCall(s, 503)}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(minuteShares(calls, tc.elapsed, tc.tokensPerMinute), tc.want); diff != "" {
				t.Errorf("minuteShares (-got +want):\n%s", diff)
			}
		})
	}
}
