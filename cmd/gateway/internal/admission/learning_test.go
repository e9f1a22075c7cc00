package admission

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// learningGate is a gate whose policy is compiled anew with what it learned whenever it says the
// learned limits changed, as the gateway's main does.
type learningGate struct {
	*Gate
	t      *testing.T
	cfg    *gatewayv1.Config
	policy atomic.Pointer[policy.Policy]
}

func newLearningGate(t *testing.T, pl plan) *learningGate {
	lg := &learningGate{t: t}
	p := pl.compile(t)
	lg.cfg = p.Config
	lg.policy.Store(p)
	lg.Gate = New(Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{}), Policy: lg.policy.Load})
	t.Cleanup(lg.Close)
	return lg
}

// report takes in a report, and recompiles when it changed what was learned.
func (lg *learningGate) report(r Reported) bool {
	changed := lg.Reported("lab", r)
	if changed {
		lg.recompile()
	}
	return changed
}

// forgetStale forgets stale limits, and recompiles when it forgot any.
func (lg *learningGate) forgetStale() bool {
	forgot := lg.ForgetStale()
	if forgot {
		lg.recompile()
	}
	return forgot
}

func (lg *learningGate) recompile() {
	p, err := policy.CompileLearned(lg.cfg, 1, lg.Learned())
	if err != nil {
		lg.t.Fatal(err)
	}
	lg.policy.Store(p)
}

// learned is what the gate learned of the provider "lab".
func (lg *learningGate) learned() gatewayv1.LearnedLimits { return lg.Learned()["lab"] }

// TestALearnedLimitIsForgottenWhenNoAnswerReportsItAgain checks that a learned limit holds while
// answers report it, and is forgotten learnedTTL after the last that did: an answer that reports
// another limit does not hold it.
func TestALearnedLimitIsForgottenWhenNoAnswerReportsItAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lg := newLearningGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 600_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}})
		tokens := gatewayv1.LearnedLimits{TokensPerMinute: 100_000}
		both := gatewayv1.LearnedLimits{RequestsPerMinute: 1000, TokensPerMinute: 100_000}
		steps := []struct {
			name       string
			after      time.Duration
			reported   *gatewayv1.LearnedLimits // nil: no answer, a sweep
			wantChange bool
			want       gatewayv1.LearnedLimits
		}{
			{"learned", 0, &tokens, true, tokens},
			{"reported again", 4 * time.Minute, &tokens, false, tokens},
			{"requests only", time.Minute, &gatewayv1.LearnedLimits{RequestsPerMinute: 1000}, true, both},
			{"within the TTL of the last report of tokens", 3*time.Minute + 59*time.Second, nil, false, both},
			{"tokens forgotten", time.Second, nil, true, gatewayv1.LearnedLimits{RequestsPerMinute: 1000}},
			{"requests forgotten", time.Minute, nil, true, gatewayv1.LearnedLimits{}},
			{"nothing left to forget", time.Hour, nil, false, gatewayv1.LearnedLimits{}},
		}
		for _, s := range steps {
			time.Sleep(s.after)
			var changed bool
			if s.reported != nil {
				changed = lg.report(Reported{Limits: *s.reported})
			} else {
				changed = lg.forgetStale()
			}
			if changed != s.wantChange {
				t.Errorf("%s: changed = %t; want %t", s.name, changed, s.wantChange)
			}
			if diff := cmp.Diff(s.want, lg.learned()); diff != "" {
				t.Errorf("%s: learned (-want +got):\n%s", s.name, diff)
			}
		}
		if got := lg.policy.Load().Provider("lab").Learned; !got.IsZero() {
			t.Errorf("the policy in force paces to %+v; want the configured limits", got)
		}
	})
}

// TestALearnedLimitIsNeverBelowWhatTheProviderServed checks that a provider reporting one token a
// minute is held to a hundredth of its configured 600,000, that a call larger than that goes as a
// probe rather than being refused as too large, and that once the provider served it, what it
// reports is held at least at that call's size.
func TestALearnedLimitIsNeverBelowWhatTheProviderServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lg := newLearningGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 600_000, tenants: []gatewayv1.Tenant{tenant("acme", "alice")}})
		if !lg.report(Reported{Limits: gatewayv1.LearnedLimits{TokensPerMinute: 1}}) {
			t.Fatal("a report of one token a minute taught nothing")
		}
		if got, want := lg.learned(), (gatewayv1.LearnedLimits{TokensPerMinute: 6_000}); got != want {
			t.Fatalf("learned %+v from a report of one token a minute; want %+v, a hundredth of the configured", got, want)
		}
		probe := mustAdmit(t, lg.Gate, request(t, lg.policy.Load(), "sk-acme-alice", 80_000))
		probe.Settle(estimate.Usage{PromptTokens: 40_000, CompletionTokens: 40_000})
		if !lg.report(Reported{Limits: gatewayv1.LearnedLimits{TokensPerMinute: 1}}) {
			t.Error("the answer after the probe was served changed nothing")
		}
		if got, want := lg.learned(), (gatewayv1.LearnedLimits{TokensPerMinute: 80_000}); got != want {
			t.Errorf("learned %+v after a call of 80,000 tokens was served; want %+v", got, want)
		}
	})
}

// TestACallLargerThanALearnedLimitWaitsForItToBeWhole checks that a call larger than what the
// provider's answers taught waits until the limit is whole, then goes: waiting does help.
func TestACallLargerThanALearnedLimitWaitsForItToBeWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acme := tenant("acme", "alice")
		acme.MaxWait = metav1.Duration{Duration: 5 * time.Minute}
		lg := newLearningGate(t, plan{requestsPerMinute: 6000, tokensPerMinute: 600_000, tenants: []gatewayv1.Tenant{acme}})
		lg.report(Reported{Limits: gatewayv1.LearnedLimits{TokensPerMinute: 1}}) // held at 6,000
		mustAdmit(t, lg.Gate, request(t, lg.policy.Load(), "sk-acme-alice", 5_000)).Settle(estimate.Usage{PromptTokens: 2500, CompletionTokens: 2500})
		start := time.Now()
		ticket, refusal := lg.Admit(t.Context(), request(t, lg.policy.Load(), "sk-acme-alice", 8_000))
		if refusal != nil {
			t.Fatalf("a call larger than the learned limit was refused: %+v (%s); want it to wait and go", refusal, refusal.Reason)
		}
		ticket.Refund()
		if waited := time.Since(start); waited <= 0 || waited > 62*time.Second {
			t.Errorf("the call went after %s; want it to wait for the minute to pass the earlier call", waited)
		}
	})
}
