package admission

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
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

// TestComebackByTheProbe checks when a call turned away is told to come back while a provider of
// its pool is out behind its breaker: no later than that provider's probe, within the call's own
// slot of the drain, where it would otherwise wait for the rest of the pool alone.
func TestComebackByTheProbe(t *testing.T) {
	a := arrival{item: &fairqueue.Item{Cost: 1000}, rate: 100} // a slot of 10 s
	for range 20 {
		if got := comebackAt(a, 100*time.Second, 10*time.Second); got < 95*time.Second || got >= 105*time.Second {
			t.Fatalf("no provider out: back in %s; want 95 s to 105 s, when the lane's wait is down to half the bound", got)
		}
		a.probe = 5 * time.Second
		if got := comebackAt(a, 100*time.Second, 10*time.Second); got < 5*time.Second || got >= 15*time.Second {
			t.Fatalf("a provider probed in 5 s: back in %s; want 5 s to 15 s", got)
		}
		a.probe = 0
	}
}

// TestBreakerNextProbe checks when a breaker next lets a call through: never set while closed,
// when it opened plus openFor while open, and when its probe went plus openFor while that probe is
// out.
func TestBreakerNextProbe(t *testing.T) {
	cfg := gatewayv1.Breaker{Failures: 1, OpenFor: metav1.Duration{Duration: 10 * time.Second}}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var b breaker
	if got := b.nextProbe(cfg); !got.IsZero() {
		t.Errorf("closed: next probe %s; want none", got)
	}
	b.attempted(false, start, cfg)
	if got, want := b.nextProbe(cfg), start.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("open: next probe %s; want %s", got, want)
	}
	b.sent(start.Add(12 * time.Second)) // half open: the probe goes
	if got, want := b.nextProbe(cfg), start.Add(22*time.Second); !got.Equal(want) {
		t.Errorf("half open, probe out: next probe %s; want %s", got, want)
	}
	b.attempted(true, start.Add(13*time.Second), cfg)
	if got := b.nextProbe(cfg); !got.IsZero() {
		t.Errorf("closed again: next probe %s; want none", got)
	}
}
