package admission

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// TestBreaker walks a breaker through its states on a fake clock: failures in a row open it, a
// success in between starts the count again, an open breaker lets nothing through until openFor
// has passed, then one probe at a time, and the probe's answer closes it or opens it again.
func TestBreaker(t *testing.T) {
	cfg := gatewayv1.Breaker{Failures: 3, OpenFor: metav1.Duration{Duration: 10 * time.Second}}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at        time.Duration
		do        string // "fail", "serve", "send" (a call sent), or "" to only look
		wantState gatewayv1.BreakerState
		wantAllow bool
		wantOpens int64
	}
	steps := []step{
		{at: 0, do: "fail", wantState: gatewayv1.BreakerClosed, wantAllow: true},
		{at: 1, do: "fail", wantState: gatewayv1.BreakerClosed, wantAllow: true},
		{at: 2, do: "serve", wantState: gatewayv1.BreakerClosed, wantAllow: true}, // the count starts again
		{at: 3, do: "fail", wantState: gatewayv1.BreakerClosed, wantAllow: true},
		{at: 4, do: "fail", wantState: gatewayv1.BreakerClosed, wantAllow: true},
		{at: 5, do: "fail", wantState: gatewayv1.BreakerOpen, wantAllow: false, wantOpens: 1},
		{at: 6, do: "fail", wantState: gatewayv1.BreakerOpen, wantAllow: false, wantOpens: 1}, // a call sent before it opened
		{at: 14, wantState: gatewayv1.BreakerOpen, wantAllow: false, wantOpens: 1},
		{at: 15, do: "send", wantState: gatewayv1.BreakerHalfOpen, wantAllow: false, wantOpens: 1}, // the probe is out
		{at: 24, wantState: gatewayv1.BreakerHalfOpen, wantAllow: false, wantOpens: 1},
		{at: 25, wantState: gatewayv1.BreakerHalfOpen, wantAllow: true, wantOpens: 1}, // it never answered
		{at: 25, do: "send", wantState: gatewayv1.BreakerHalfOpen, wantAllow: false, wantOpens: 1},
		{at: 26, do: "fail", wantState: gatewayv1.BreakerOpen, wantAllow: false, wantOpens: 2}, // the probe failed
		{at: 36, do: "send", wantState: gatewayv1.BreakerHalfOpen, wantAllow: false, wantOpens: 2},
		{at: 37, do: "serve", wantState: gatewayv1.BreakerClosed, wantAllow: true, wantOpens: 2},
	}
	var b breaker
	for i, s := range steps {
		now := start.Add(s.at * time.Second)
		switch s.do {
		case "fail":
			b.attempted(false, now, cfg)
		case "serve":
			b.attempted(true, now, cfg)
		case "send":
			b.sent(now)
		}
		if got, allow := b.state(now), b.allows(now, cfg); got != s.wantState || allow != s.wantAllow || b.opens != s.wantOpens {
			t.Errorf("step %d (%s at %ds): %s, allows %v, opened %d times; want %s, %v, %d", i, s.do, s.at, got, allow, b.opens, s.wantState, s.wantAllow, s.wantOpens)
		}
	}
}
