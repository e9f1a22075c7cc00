package policy

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// anthropicLike is the example configuration with its provider limited as Anthropic and Gemini
// limit theirs: 1,500 requests a minute, 30,000 input and 8,000 output tokens a minute, 1,000
// requests a day from midnight in Los Angeles, cache reads left out of its input tokens and each
// output token counted weight times; its tenant acme limits output tokens too, as a plan.
func anthropicLike(t *testing.T, weight int32, learned gatewayv1.LearnedLimits) *Policy {
	t.Helper()
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pr := &cfg.Providers[0]
	pr.TokensPerMinute, pr.MaxInFlight, pr.HeadroomPercent = 0, 0, 100
	pr.Limits = []gatewayv1.Limit{
		{Dimension: gatewayv1.DimensionInputTokens, Amount: 30_000, Per: gatewayv1.PeriodMinute},
		{Dimension: gatewayv1.DimensionOutputTokens, Amount: 8_000, Per: gatewayv1.PeriodMinute},
		{Dimension: gatewayv1.DimensionRequests, Amount: 1_000, Per: gatewayv1.PeriodDay},
	}
	pr.TimeZone, pr.CachedInputCounts, pr.OutputTokenWeight = "America/Los_Angeles", new(bool), weight
	acme := &cfg.Tenants[0]
	acme.PerUser, acme.Endpoints, acme.Budget = nil, nil, nil
	acme.PerTenant = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionOutputTokens, Amount: 100_000, Per: gatewayv1.PeriodMinute, OnLimit: gatewayv1.BehaviorQueue}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := CompileLearned(cfg, 1, map[string]gatewayv1.LearnedLimits{"openai": learned})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAProvidersLimitsAreEachLimitAsItCountsIt compiles a provider's limits list: each minute a
// rolling minute and its pace, the day a calendar window; a call takes its input from the input
// limits, its output cap weight times from the output limits, and one request from each request
// limit, while the plan's output limit takes its cap once.
func TestAProvidersLimitsAreEachLimitAsItCountsIt(t *testing.T) {
	p := anthropicLike(t, 5, gatewayv1.LearnedLimits{})
	cost := Cost{Tokens: 1_500, InputTokens: 1_000, OutputTokens: 500}
	checks, queueing := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, cost, Shared, "l")
	want := []check{
		{Key: "{tenant:acme}:tenant:outputTokens:minute", Level: "tenant", Capacity: 100_000, Cost: 500},
		{Key: "{openai}:provider:requests:minute", Level: "provider", Capacity: 1_500, Cost: 1},
		{Key: "{openai}:provider:requests:pace", Level: "provider", Capacity: 25, Cost: 1},
		{Key: "{openai}:provider:inputTokens:minute", Level: "provider", Capacity: 30_000, Cost: 1_000},
		{Key: "{openai}:provider:inputTokens:pace", Level: "provider", Capacity: 4_096, Cost: 1_000},
		{Key: "{openai}:provider:outputTokens:minute", Level: "provider", Capacity: 8_000, Cost: 2_500},
		{Key: "{openai}:provider:outputTokens:pace", Level: "provider", Capacity: 4_096, Cost: 2_500},
		{Key: "{openai}:provider:requests:day", Level: "provider", Capacity: 1_000, Cost: 1},
		{Key: "{openai}:record", Level: "provider", Capacity: 0, Cost: 0},
	}
	if diff := cmp.Diff(want, summarize(checks)); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	for i := range len(checks) - 1 {
		if !queueing.Queues(i) {
			t.Errorf("%s does not queue; want every one queue", checks[i].Limit.Key)
		}
	}
	day := checks[7].Limit
	if !day.IsWindow() || len(p.Provider("openai").scopes) != 1 || p.Provider("openai").scopes[0].Windows[0] != day {
		t.Errorf("the provider's day: window %v, scopes %v; want a calendar window in the provider's scope", day.IsWindow(), p.Provider("openai").scopes)
	}
	if got := p.Provider("openai").SustainedPerMinute(ratelimit.OutputTokens); got != 7_737 {
		t.Errorf("SustainedPerMinute(OutputTokens) = %d; want 8,000 × 59/61, 7,737", got)
	}
}

// TestAProvidersDayResetsAtItsMidnight takes a provider's day of requests in Los Angeles: full at
// 23:00 there, it refuses until midnight there, an hour later, and then lets the next day's go.
func TestAProvidersDayResetsAtItsMidnight(t *testing.T) {
	p := anthropicLike(t, 1, gatewayv1.LearnedLimits{})
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{}, Shared, "l")
	day := []ratelimit.Check{{Limit: checks[7].Limit, Cost: 1_000}}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	m, ctx := ratelimit.NewMemory(), context.Background()
	late := time.Date(2026, 12, 7, 23, 0, 0, 0, la)
	if d, err := decide(m, ctx, day, late); err != nil || !d.Allowed {
		t.Fatalf("the day's 1,000 requests at 23:00: %+v, %v; want allowed", d, err)
	}
	day[0].Cost = 1
	if d, err := decide(m, ctx, day, late.Add(30*time.Minute)); err != nil || d.Allowed || d.RetryAfter != 30*time.Minute {
		t.Errorf("one more at 23:30: allowed %v, retry after %v, %v; want refused until midnight in Los Angeles, 30m", d.Allowed, d.RetryAfter, err)
	}
	if d, err := decide(m, ctx, day, time.Date(2026, 12, 8, 0, 0, 0, 0, la)); err != nil || !d.Allowed {
		t.Errorf("one at midnight: %+v, %v; want allowed, a new day", d, err)
	}
}

// TestCountedLeavesCacheReadsOutAndWeighsOutput checks a call's cost as a provider's own limits
// count it, against how its plan's count it.
func TestCountedLeavesCacheReadsOutAndWeighsOutput(t *testing.T) {
	call := Cost{Tokens: 1_500, InputTokens: 1_000, CachedInputTokens: 800, OutputTokens: 500, MicroDollars: 7}
	for _, tc := range []struct {
		name   string
		counts bool
		weight int32
		want   Cost
	}{
		{"as OpenAI counts: as it is", true, 1, call},
		{"cache reads left out", false, 1, Cost{Tokens: 700, InputTokens: 200, CachedInputTokens: 800, OutputTokens: 500, MicroDollars: 7}},
		{"output five times", true, 5, Cost{Tokens: 3_500, InputTokens: 1_000, CachedInputTokens: 800, OutputTokens: 2_500, MicroDollars: 7}},
		{"both", false, 5, Cost{Tokens: 2_700, InputTokens: 200, CachedInputTokens: 800, OutputTokens: 2_500, MicroDollars: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Provider{Config: &gatewayv1.Provider{CachedInputCounts: &tc.counts, OutputTokenWeight: tc.weight}}
			if diff := cmp.Diff(tc.want, p.Counted(call)); diff != "" {
				t.Errorf("Counted (-want +got):\n%s", diff)
			}
		})
	}
	p := &Provider{Config: &gatewayv1.Provider{CachedInputCounts: new(bool), OutputTokenWeight: 100}}
	huge := p.Counted(Cost{Tokens: 1 << 62, InputTokens: 10, CachedInputTokens: 50, OutputTokens: 1 << 62})
	if huge.OutputTokens != 1<<63-1 || huge.Tokens != 1<<63-1 || huge.InputTokens != 0 {
		t.Errorf("Counted of a huge call = %+v; want its output and tokens saturated, its input no less than none", huge)
	}
}

// TestSettlementCorrectsTheOutputCapToTheUsage settles a call admitted on its output cap: every
// output limit gives back what it did not write, the provider's at its weight, and the provider's
// input limit gives back what it read from the cache, which its plan's limits still count.
func TestSettlementCorrectsTheOutputCapToTheUsage(t *testing.T) {
	p := anthropicLike(t, 5, gatewayv1.LearnedLimits{})
	route := p.Routes("gpt-4o-mini")[0]
	estimate := Cost{Tokens: 1_500, InputTokens: 1_000, OutputTokens: 500}
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), route, gatewayv1.EndpointChat, estimate, Shared, "l")
	actual := Cost{Tokens: 1_120, InputTokens: 1_000, CachedInputTokens: 600, OutputTokens: 120}
	got := Settlement(nil, checks, route.Provider, actual, 0)
	want := []check{
		{Key: "{tenant:acme}:tenant:outputTokens:minute", Level: "tenant", Capacity: 100_000, Cost: -380},
		{Key: "{openai}:provider:inputTokens:minute", Level: "provider", Capacity: 30_000, Cost: -600},
		{Key: "{openai}:provider:inputTokens:pace", Level: "provider", Capacity: 4_096, Cost: -600},
		{Key: "{openai}:provider:outputTokens:minute", Level: "provider", Capacity: 8_000, Cost: -1_900},
		{Key: "{openai}:provider:outputTokens:pace", Level: "provider", Capacity: 4_096, Cost: -1_900},
	}
	if diff := cmp.Diff(want, summarize(got)); diff != "" {
		t.Errorf("settlement (-want +got):\n%s", diff)
	}
}

// TestLearnedInputAndOutputLimitsLowerThoseConfiguredOrAddThem learns an output limit lower than
// the configured one and an input limit below its floor, and a tokens limit the provider was not
// configured with, which the compiled provider then holds to.
func TestLearnedInputAndOutputLimitsLowerThoseConfiguredOrAddThem(t *testing.T) {
	base := anthropicLike(t, 1, gatewayv1.LearnedLimits{})
	reported := gatewayv1.LearnedLimits{InputTokensPerMinute: 10, OutputTokensPerMinute: 4_000, TokensPerMinute: 50_000}
	learned := Lower(base.Provider("openai").Config, reported, gatewayv1.LearnedLimits{})
	if want := (gatewayv1.LearnedLimits{InputTokensPerMinute: 300, OutputTokensPerMinute: 4_000, TokensPerMinute: 50_000}); learned != want {
		t.Fatalf("Lower = %+v; want %+v (input at a hundredth of 30,000)", learned, want)
	}
	p := anthropicLike(t, 1, learned)
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{InputTokens: 1_000, OutputTokens: 5_000}, Shared, "l")
	want := map[string]int64{
		"{openai}:provider:inputTokens:minute": 300, "{openai}:provider:outputTokens:minute": 4_000, "{openai}:provider:tokens:minute": 50_000,
	}
	for _, c := range checks {
		w, ok := want[c.Limit.Key]
		if !ok {
			continue
		}
		delete(want, c.Limit.Key)
		if c.Limit.Capacity() != w {
			t.Errorf("%s: capacity %d; want %d", c.Limit.Key, c.Limit.Capacity(), w)
		}
		if taken := p.Provider("openai").TokensTaken(c.Limit, c.Cost); taken != min(c.Cost, w) {
			t.Errorf("%s: a call of %d takes %d; want all a learned limit holds at most, %d", c.Limit.Key, c.Cost, taken, min(c.Cost, w))
		}
	}
	if len(want) > 0 {
		t.Errorf("limits not compiled: %v", want)
	}
}
