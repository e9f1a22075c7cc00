package policy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

func compileExample(t *testing.T, replicas int64) *Policy {
	t.Helper()
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(cfg, replicas)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// check is the part of a ratelimit.Check a test compares.
type check struct {
	Key      string
	Level    string
	Capacity int64
	Cost     int64
}

func summarize(checks []ratelimit.Check) []check {
	var out []check
	for _, c := range checks {
		out = append(out, check{Key: c.Limit.Key, Level: c.Limit.Level.String(), Capacity: c.Limit.Capacity(), Cost: c.Cost})
	}
	return out
}

func TestChecksCoverEveryLevelInOrder(t *testing.T) {
	p := compileExample(t, 1)
	alice := p.Caller("sk-acme-alice")
	if alice == nil || alice.Tenant.Name != "acme" || alice.User != "alice" {
		t.Fatalf("Caller(alice's key) = %+v; want acme's alice", alice)
	}
	route := p.Routes("gpt-4o-mini")[0]
	cost := Cost{Tokens: 900, MicroDollars: 2700}
	got := summarize(first(Checks(nil, alice, route, gatewayv1.EndpointChat, cost, Shared, "lease")))
	// 95% headroom on 1,500 RPM, 300,000 TPM and 200 in flight (the provider's per-minute limits
	// are rolling windows of the whole limit, each paced by a bucket that holds a second of it);
	// $5,000 a month in micro-dollars.
	want := []check{
		{Key: "{tenant:acme}:user:alice:requests:day", Level: "user", Capacity: 1000, Cost: 1},
		{Key: "{tenant:acme}:tenant:tokens:minute", Level: "tenant", Capacity: 200000, Cost: 900},
		{Key: "{tenant:acme}:tenant:budget", Level: "tenant", Capacity: 5_000_000_000, Cost: 2700},
		{Key: "{tenant:acme}:endpoint:chat:requests:minute", Level: "endpoint", Capacity: 60, Cost: 1},
		{Key: "{openai}:provider:requests:minute", Level: "provider", Capacity: 1425, Cost: 1},
		{Key: "{openai}:provider:requests:pace", Level: "provider", Capacity: 23, Cost: 1},
		{Key: "{openai}:provider:tokens:minute", Level: "provider", Capacity: 285_000, Cost: 900},
		{Key: "{openai}:provider:tokens:pace", Level: "provider", Capacity: 4750, Cost: 900},
		{Key: "{openai}:provider:inflight", Level: "provider", Capacity: 190, Cost: 1},
		// The tenant's calendar windows (alice's day, the budget) are trusted at the record's
		// version, none here.
		{Key: "{tenant:acme}:record", Level: "tenant", Capacity: 0, Cost: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	embeddings := summarize(first(Checks(nil, alice, route, gatewayv1.EndpointEmbeddings, cost, Shared, "lease")))
	if len(embeddings) != len(want)-1 {
		t.Errorf("embeddings checks = %d; want %d: the chat endpoint's limit applies to chat only", len(embeddings), len(want)-1)
	}
}

// TestProviderTokensPerMinuteAreARollingMinute decides on the provider's tokens per minute, shared
// and local, as compiled: a call of the whole limit after headroom passes on an empty minute, and
// one token more waits until the second that call took from has left the rolling minute, 61 s
// from its start (the window counts that second in full until it is wholly past).
func TestProviderTokensPerMinuteAreARollingMinute(t *testing.T) {
	p := compileExample(t, 4)
	alice, route := p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0]
	start := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	for _, scope := range []Share{Shared, Local} {
		checks, _ := Checks(nil, alice, route, gatewayv1.EndpointChat, Cost{}, scope, "l")
		i := slices.IndexFunc(checks, func(c ratelimit.Check) bool { return c.Limit.Key == "{openai}:provider:tokens:minute" })
		tokens := checks[i].Limit
		want := int64(285_000)
		if scope == Local {
			want /= 4
		}
		m, ctx := ratelimit.NewMemory(), context.Background()
		if d, err := decide(m, ctx, []ratelimit.Check{{Limit: tokens, Cost: want}}, start.Add(300*time.Millisecond)); err != nil || !d.Allowed {
			t.Fatalf("share %d: a call of the whole %d tokens: %+v, %v; want allowed", scope, want, d, err)
		}
		d, err := decide(m, ctx, []ratelimit.Check{{Limit: tokens, Cost: 1}}, start.Add(59*time.Second))
		if err != nil || d.Allowed || d.RetryAfter != 2*time.Second {
			t.Errorf("share %d: one token more 59 s later: %+v, %v; want refused for 2 s", scope, d, err)
		}
		if d, err := decide(m, ctx, []ratelimit.Check{{Limit: tokens, Cost: want}}, start.Add(61*time.Second)); err != nil || !d.Allowed {
			t.Errorf("share %d: the whole limit again 61 s after the first second began: %+v, %v; want allowed", scope, d, err)
		}
	}
}

// TestABacklogIsHeldByTheProvidersPaceNotItsMinute drives a backlog of equal calls against the
// provider's tokens per minute as compiled, the rolling minute and its pace, on a simulated clock
// for twelve minutes: each call is tried again when the refusal says. The pace holds it: the
// burst that goes first, a second of the limit, fills the rolling minute a minute later for a
// moment at most. No rolling minute holds more than the limit, and every ten seconds after the
// first drain the pace's 59/61 of the limit, to a call: no minute echoes the burst of the one
// before.
func TestABacklogIsHeldByTheProvidersPaceNotItsMinute(t *testing.T) {
	p := compileExample(t, 1)
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{}, Shared, "l")
	var provider []ratelimit.Check
	for _, c := range checks {
		if strings.HasPrefix(c.Limit.Key, "{openai}:provider:tokens:") {
			provider = append(provider, ratelimit.Check{Limit: c.Limit, Cost: 900})
		}
	}
	const limit, cost = 285_000, 900
	m, ctx := ratelimit.NewMemory(), context.Background()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var (
		took            []time.Time
		heldByTheMinute time.Duration
	)
	for now := start; now.Before(start.Add(12 * time.Minute)); {
		d, err := decide(m, ctx, provider, now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			took = append(took, now)
			continue
		}
		wait := max(d.RetryAfter, time.Microsecond)
		if d.RefusedBy(provider).Key != "{openai}:provider:tokens:pace" {
			heldByTheMinute += wait
		}
		now = now.Add(wait)
	}
	if heldByTheMinute >= time.Second {
		t.Errorf("the rolling minute held the backlog %s in all; want less than a second: the pace holds it", heldByTheMinute)
	}
	within := func(from time.Time, d time.Duration) int64 {
		i, _ := slices.BinarySearchFunc(took, from, func(a, b time.Time) int { return a.Compare(b) })
		j, _ := slices.BinarySearchFunc(took, from.Add(d), func(a, b time.Time) int { return a.Compare(b) })
		return int64(j-i) * cost
	}
	for _, at := range took {
		if n := within(at, time.Minute); n > limit {
			t.Fatalf("the minute from +%s holds %d tokens; want at most %d", at.Sub(start), n, limit)
		}
	}
	want := int64(limit * 59 / 61 / 6)
	for from := start.Add(10 * time.Second); from.Before(start.Add(11 * time.Minute)); from = from.Add(10 * time.Second) {
		if got := within(from, 10*time.Second); got < want-cost || got > want+cost {
			t.Errorf("the ten seconds from +%s drained %d tokens; want %d, 59/61 of the limit", from.Sub(start), got, want)
		}
	}
}

func TestLocalChecksTakeOneReplicasShare(t *testing.T) {
	p := compileExample(t, 4)
	alice, route := p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0]
	shared := summarize(first(Checks(nil, alice, route, gatewayv1.EndpointChat, Cost{}, Shared, "l")))
	local := summarize(first(Checks(nil, alice, route, gatewayv1.EndpointChat, Cost{}, Local, "l")))
	if len(local) != len(shared)-1 {
		t.Fatalf("%d local checks for %d shared; want all but the mark: a window is never decided locally", len(local), len(shared))
	}
	for i := range local {
		if want := max(shared[i].Capacity/4, 1); local[i].Capacity != want {
			t.Errorf("%s: local capacity %d; want a quarter of %d", shared[i].Key, local[i].Capacity, shared[i].Capacity)
		}
	}
}

func TestSettlementChargesTheDifferenceAndFreesTheSlot(t *testing.T) {
	p := compileExample(t, 1)
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{Tokens: 900, MicroDollars: 2700}, Shared, "lease-1")
	got := Release(Settlement(nil, checks, p.Provider("openai"), Cost{Tokens: 50, MicroDollars: 150}, 0), checks)
	want := []check{
		{Key: "{tenant:acme}:tenant:tokens:minute", Level: "tenant", Capacity: 200000, Cost: -850},
		{Key: "{tenant:acme}:tenant:budget", Level: "tenant", Capacity: 5_000_000_000, Cost: -2550},
		{Key: "{openai}:provider:tokens:minute", Level: "provider", Capacity: 285_000, Cost: -850},
		{Key: "{openai}:provider:tokens:pace", Level: "provider", Capacity: 4750, Cost: -850},
		{Key: "{openai}:provider:inflight", Level: "provider", Capacity: 190, Cost: -1},
	}
	if diff := cmp.Diff(want, summarize(got)); diff != "" {
		t.Errorf("settlement (-want +got):\n%s", diff)
	}
	if lease := got[len(got)-1].Lease; lease != "lease-1" {
		t.Errorf("the released slot's lease = %q; want the call's", lease)
	}
}

// A provider that counted more at admission than the call used holds it for its minute: only
// its own token limits keep it, and they are not charged it again on top of the usage.
func TestSettlementKeepsWhatTheProviderHeld(t *testing.T) {
	p := compileExample(t, 1)
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{Tokens: 706, MicroDollars: 2118}, Shared, "lease-1")
	for i := range checks {
		if checks[i].Limit.Level == ratelimit.LevelProvider && checks[i].Limit.Dimension == ratelimit.Tokens {
			checks[i].Cost = 855 // the provider's count at admission, as the gate charges it
		}
	}
	for _, tc := range []struct {
		name       string
		actual     int64
		tenant, pr int64
	}{
		{"usage as the provider counted", 855, 149, 0},
		{"usage below the provider's count", 700, -6, 0},
		{"usage above the provider's count", 900, 194, 45},
	} {
		got := Settlement(nil, checks, p.Provider("openai"), Cost{Tokens: tc.actual, MicroDollars: 2118}, 855)
		want := []check{{Key: "{tenant:acme}:tenant:tokens:minute", Level: "tenant", Capacity: 200000, Cost: tc.tenant}}
		if tc.pr != 0 {
			want = append(want,
				check{Key: "{openai}:provider:tokens:minute", Level: "provider", Capacity: 285_000, Cost: tc.pr},
				check{Key: "{openai}:provider:tokens:pace", Level: "provider", Capacity: 4750, Cost: tc.pr})
		}
		if diff := cmp.Diff(want, summarize(got)); diff != "" {
			t.Errorf("%s: settlement (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestCompileRefusesAMissingKeyFile(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Providers[0].APIKeyFile = "/nonexistent/openai.key"
	if _, err := Compile(cfg, 1); err == nil {
		t.Fatal("Compile with a missing key file succeeded; want an error")
	}
}

// TestProviderEndpoints checks where a provider's calls go: its baseURL alone, each of its Pods'
// endpoints, or nowhere while it is paused without Pods.
func TestProviderEndpoints(t *testing.T) {
	tests := []struct {
		name      string
		baseURL   string
		endpoints []string
		paused    bool
		want      []string
	}{
		{name: "hosted", baseURL: "https://api.example/v1/", want: []string{"https://api.example/v1"}},
		{name: "self-hosted", endpoints: []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"}, want: []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"}},
		{name: "paused without Pods", paused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
			if err != nil {
				t.Fatal(err)
			}
			pc := &cfg.Providers[0]
			pc.BaseURL, pc.Endpoints, pc.Paused = tc.baseURL, tc.endpoints, tc.paused
			p, err := Compile(cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range p.Provider(pc.Name).Endpoints {
				got = append(got, u.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

func first[A, B any](a A, _ B) A { return a }

func TestQueueingFollowsEachLimitsBehaviour(t *testing.T) {
	p := compileExample(t, 1)
	_, queueing := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{}, Shared, "l")
	// user requests/day and the budget reject; the tenant's tokens/minute, the endpoint's
	// requests/minute and the provider's limits queue.
	want := []bool{false, true, false, true, true, true, true}
	for i, w := range want {
		if got := queueing.Queues(i); got != w {
			t.Errorf("check %d queues = %v; want %v", i, got, w)
		}
	}
}

// TestInFlightLimitsHoldOneSlotAtEachLevel gives acme's users 2 calls at once, acme 5 (refused
// past it) and its chat endpoint 3: a call takes a slot of each under its lease, each queues or
// rejects as its limit says, a replica's local share is its part of each, and the call's end
// frees every slot it holds.
func TestInFlightLimitsHoldOneSlotAtEachLevel(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	acme := &cfg.Tenants[0]
	inFlight := func(n int64, at gatewayv1.Behavior) gatewayv1.Limit {
		return gatewayv1.Limit{Dimension: gatewayv1.DimensionInFlight, Amount: n, OnLimit: at}
	}
	acme.PerUser = []gatewayv1.Limit{inFlight(2, gatewayv1.BehaviorQueue)}
	acme.PerTenant = []gatewayv1.Limit{inFlight(5, gatewayv1.BehaviorReject)}
	acme.Endpoints[0].Limits = []gatewayv1.Limit{inFlight(3, gatewayv1.BehaviorQueue)}
	acme.Budget = nil
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	alice, route := p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0]
	checks, queueing := Checks(nil, alice, route, gatewayv1.EndpointChat, Cost{Tokens: 900}, Shared, "lease-1")
	want := []check{
		{Key: "{tenant:acme}:user:alice:inflight", Level: "user", Capacity: 2, Cost: 1},
		{Key: "{tenant:acme}:tenant:inflight", Level: "tenant", Capacity: 5, Cost: 1},
		{Key: "{tenant:acme}:endpoint:chat:inflight", Level: "endpoint", Capacity: 3, Cost: 1},
	}
	if diff := cmp.Diff(want, summarize(checks[:3])); diff != "" {
		t.Errorf("the plan's checks (-want +got):\n%s", diff)
	}
	for i, w := range []bool{true, false, true} {
		if got := queueing.Queues(i); got != w {
			t.Errorf("%s queues = %v; want %v", checks[i].Limit.Key, got, w)
		}
	}
	for _, c := range checks[:3] {
		if c.Limit.Dimension != ratelimit.InFlight || c.Lease != "lease-1" {
			t.Errorf("%s: dimension %s, lease %q; want calls in flight under the call's lease", c.Limit.Key, c.Limit.Dimension, c.Lease)
		}
	}
	local := summarize(first(Checks(nil, alice, route, gatewayv1.EndpointChat, Cost{}, Local, "l")))
	if got := []int64{local[0].Capacity, local[1].Capacity, local[2].Capacity}; !slices.Equal(got, []int64{1, 2, 1}) {
		t.Errorf("a replica's local share of 2, 5 and 3 calls at once = %v; want half of each, at least 1", got)
	}
	released := summarize(Release(nil, checks))
	wantReleased := []check{
		{Key: "{tenant:acme}:user:alice:inflight", Level: "user", Capacity: 2, Cost: -1},
		{Key: "{tenant:acme}:tenant:inflight", Level: "tenant", Capacity: 5, Cost: -1},
		{Key: "{tenant:acme}:endpoint:chat:inflight", Level: "endpoint", Capacity: 3, Cost: -1},
		{Key: "{openai}:provider:inflight", Level: "provider", Capacity: 190, Cost: -1},
	}
	if diff := cmp.Diff(wantReleased, released); diff != "" {
		t.Errorf("the call's end frees (-want +got):\n%s", diff)
	}
	if alice.Tenant.scope != nil {
		t.Error("calls in flight made the tenant a scope of calendar windows; want none")
	}
}

// TestTenantLimitsAreTotalsOverProviders gives acme a second provider and the gateway a global
// limit: a call to either provider passes the same user, tenant, budget, endpoint and global
// limits, and each provider's own.
func TestTenantLimitsAreTotalsOverProviders(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	second := cfg.Providers[0]
	second.Name, second.Models = "anthropic", []gatewayv1.Model{{Name: "claude-haiku", Encoding: "o200k_base"}}
	cfg.Providers = append(cfg.Providers, second)
	cfg.Tenants[0].Providers = []string{"openai", "anthropic"}
	cfg.Global = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 100, Per: gatewayv1.PeriodMinute}}
	p, err := Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice := p.Caller("sk-acme-alice")
	toOpenAI := first(Checks(nil, alice, p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{}, Shared, "l"))
	toAnthropic := first(Checks(nil, alice, p.Routes("claude-haiku")[0], gatewayv1.EndpointChat, Cost{}, Shared, "l"))
	if len(toOpenAI) != len(toAnthropic) {
		t.Fatalf("%d checks to openai, %d to anthropic; want as many", len(toOpenAI), len(toAnthropic))
	}
	for i := range toOpenAI {
		a, b := toOpenAI[i].Limit, toAnthropic[i].Limit
		if shared := a == b; shared != (a.Level != ratelimit.LevelProvider) {
			t.Errorf("check %d: %s and %s: shared %v; want only a provider's own limits apart", i, a.Key, b.Key, shared)
		}
	}
	if b := alice.Tenant.Budget(); b == nil || b != toAnthropic[2].Limit || b.Capacity() != 5_000_000_000 {
		t.Errorf("Budget() = %v; want the one budget of $5,000 that calls to both providers take from", b)
	}
	if got := toOpenAI[4].Limit.Key; got != "{sluice:global}:requests:minute" {
		t.Errorf("the global limit's key = %q; want it in a hash tag of its own", got)
	}
}

func TestRouteFindsConfiguredNamesAndAliasesOnly(t *testing.T) {
	cfg := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name: "openai", BaseURL: "https://api.openai.example/v1",
			Models: []gatewayv1.Model{
				{Name: "gpt-4o-mini", Aliases: []string{"mini"}},
				{Name: "gpt-4"},
				{Name: "gpt-4o"},
				{Name: "gpt-4o-2024-05-13", DefaultMaxTokens: 99}, // a snapshot configured on its own
			},
		}},
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]string{
		"gpt-4o-mini":            "gpt-4o-mini",
		"gpt-4o-mini-2024-07-18": "", // a snapshot not configured: another model, at other prices
		"mini":                   "gpt-4o-mini",
		"gpt-4-0613":             "",
		"gpt-4o-2024-08-06":      "",
		"gpt-4o-2024-05-13":      "gpt-4o-2024-05-13",
		"mini-2024-07-18":        "",
		"gpt-4o-mini-2024-13-45": "", // no such date
		"gpt-4o-mini-latest":     "",
		"gpt-4o-mini-07-18":      "",
		"-2024-07-18":            "",
		"gpt-5":                  "",
	} {
		got := ""
		if r := p.Routes(model); r != nil {
			got = r[0].Model.Name
		}
		if got != want {
			t.Errorf("Routes(%q) is model %q; want %q", model, got, want)
		}
	}
}

func TestRoutePricesAreTheModelsOwnElseTheProviders(t *testing.T) {
	cfg := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name: "openai", BaseURL: "https://api.openai.example/v1",
			Prices: gatewayv1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", OutputPerMillion: "10"},
			Models: []gatewayv1.Model{
				{Name: "gpt-4o"},
				{Name: "gpt-4o-2024-05-13", Prices: &gatewayv1.Prices{InputPerMillion: "5", OutputPerMillion: "15"}},
			},
		}},
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	call := gatewayv1.Tokens{Prompt: 1000, CachedPrompt: 800, Completion: 100}
	for model, want := range map[string]int64{
		"gpt-4o":            200*2.5 + 800*1.25 + 100*10, // the provider's prices
		"gpt-4o-2024-05-13": 1000*5 + 100*15,             // a snapshot configured on its own, at its own prices, no discount for its cache
	} {
		if got := p.Routes(model)[0].Prices.CostMicros("", call); got != want {
			t.Errorf("a call to %s costs %d micro-dollars; want %d", model, got, want)
		}
	}
}

func TestLearnedLimitsLowerTheProvidersLimits(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// 1,500 RPM and 300,000 TPM configured; the provider reports 600 RPM, and 400,000 TPM,
	// which is higher than configured and so not learned.
	learned := Lower(&cfg.Providers[0], gatewayv1.LearnedLimits{RequestsPerMinute: 600, TokensPerMinute: 400_000}, gatewayv1.LearnedLimits{})
	if want := (gatewayv1.LearnedLimits{RequestsPerMinute: 600}); learned != want {
		t.Fatalf("Lower = %+v; want %+v", learned, want)
	}
	p, err := CompileLearned(cfg, 1, map[string]gatewayv1.LearnedLimits{"openai": learned})
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(first(Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{}, Shared, "l")))
	// 95% of 600 RPM is 570; tokens stay at 95% of 300,000.
	want := map[string]int64{"{openai}:provider:requests:minute": 570, "{openai}:provider:tokens:minute": 285_000}
	for _, c := range got {
		if w, ok := want[c.Key]; ok && c.Capacity != w {
			t.Errorf("%s: capacity %d; want %d", c.Key, c.Capacity, w)
		}
	}
	if got := p.Provider("openai").Config.RequestsPerMinute; got != 1500 {
		t.Errorf("the provider's configuration says %d RPM; want 1500, as configured", got)
	}
	// 285,000 × 59/61: the pace of the rolling window, which counts 61 slots of a second while 60
	// pass, less a second.
	if got := p.Provider("openai").SustainedPerMinute(ratelimit.Tokens); got != 275_655 {
		t.Errorf("SustainedPerMinute(ratelimit.Tokens) = %d; want 275655", got)
	}
}

// TestALearnedLimitIsHeldAtItsFloor checks that what a provider reports lowers its limits no
// further than a hundredth of the configured ones (1,500 RPM and 300,000 TPM), nor below the largest
// call it was seen to serve, and that a limit whose floor is the configured one is none.
func TestALearnedLimitIsHeldAtItsFloor(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	unlimited := cfg.Providers[0]
	unlimited.RequestsPerMinute, unlimited.TokensPerMinute = 0, 0
	tests := []struct {
		name             string
		provider         *gatewayv1.Provider
		reported, served gatewayv1.LearnedLimits
		want             gatewayv1.LearnedLimits
	}{
		{"above the floor", &cfg.Providers[0], gatewayv1.LearnedLimits{RequestsPerMinute: 600, TokensPerMinute: 100_000}, gatewayv1.LearnedLimits{},
			gatewayv1.LearnedLimits{RequestsPerMinute: 600, TokensPerMinute: 100_000}},
		{"one token a minute: a hundredth", &cfg.Providers[0], gatewayv1.LearnedLimits{RequestsPerMinute: 1, TokensPerMinute: 1}, gatewayv1.LearnedLimits{},
			gatewayv1.LearnedLimits{RequestsPerMinute: 15, TokensPerMinute: 3_000}},
		{"a larger call served", &cfg.Providers[0], gatewayv1.LearnedLimits{TokensPerMinute: 1}, gatewayv1.LearnedLimits{TokensPerMinute: 45_000},
			gatewayv1.LearnedLimits{TokensPerMinute: 45_000}},
		{"served as much as configured: none lower", &cfg.Providers[0], gatewayv1.LearnedLimits{TokensPerMinute: 1}, gatewayv1.LearnedLimits{TokensPerMinute: 300_000},
			gatewayv1.LearnedLimits{}},
		{"served, nothing reported", &cfg.Providers[0], gatewayv1.LearnedLimits{}, gatewayv1.LearnedLimits{TokensPerMinute: 45_000},
			gatewayv1.LearnedLimits{}},
		{"none configured: what was served", &unlimited, gatewayv1.LearnedLimits{RequestsPerMinute: 1, TokensPerMinute: 1}, gatewayv1.LearnedLimits{TokensPerMinute: 800},
			gatewayv1.LearnedLimits{RequestsPerMinute: 1, TokensPerMinute: 800}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Lower(tc.provider, tc.reported, tc.served); got != tc.want {
				t.Errorf("Lower(%+v, served %+v) = %+v; want %+v", tc.reported, tc.served, got, tc.want)
			}
		})
	}
}

// TestACallLargerThanALearnedLimitTakesAllItHolds checks that a call larger than a provider's
// learned tokens a minute takes all they hold, and goes when they are whole, while a configured
// limit, or a learned one it fits, takes the call's tokens.
func TestACallLargerThanALearnedLimitTakesAllItHolds(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	learned := map[string]gatewayv1.LearnedLimits{"openai": {TokensPerMinute: 1}} // held at 3,000, 2,850 after headroom
	for _, tc := range []struct {
		name    string
		learned map[string]gatewayv1.LearnedLimits
		tokens  int64
		want    int64
	}{
		{"learned, larger", learned, 4_000, 2_850},
		{"learned, fits", learned, 2_000, 2_000},
		{"configured, larger", nil, 400_000, 400_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompileLearned(cfg, 1, tc.learned)
			if err != nil {
				t.Fatal(err)
			}
			route := p.Routes("gpt-4o-mini")[0]
			checks, _ := Checks(nil, p.Caller("sk-acme-alice"), route, gatewayv1.EndpointChat, Cost{Tokens: tc.tokens}, Shared, "l")
			for _, c := range checks {
				if c.Limit.Key != "{openai}:provider:tokens:minute" {
					continue
				}
				if got := route.Provider.TokensTaken(c.Limit, c.Cost); got != tc.want {
					t.Errorf("a call of %d tokens takes %d of the provider's minute; want %d", tc.tokens, got, tc.want)
				}
			}
		})
	}
}

// TestAPlanPassesAtMostMaxChecksLimits compiles a plan whose calls pass as many limits as one
// decision holds, the provider's eight among them and the mark of its month's spend, and refuses
// one limit more, naming the tenant and the provider.
func TestAPlanPassesAtMostMaxChecksLimits(t *testing.T) {
	cfg, err := gatewayv1.Load("../../../../api/gateway/v1/testdata/two-tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	openai := &cfg.Providers[0]
	openai.SpendPerMinute, openai.SpendPerMonth = "1", "1000"
	acme := &cfg.Tenants[0]
	acme.Endpoints, acme.Budget = nil, nil
	perHour := gatewayv1.Limit{Dimension: gatewayv1.DimensionRequests, Amount: 100, Per: gatewayv1.PeriodHour}
	acme.PerTenant = nil
	acme.PerUser = slices.Repeat([]gatewayv1.Limit{perHour}, ratelimit.MaxChecks-9)
	p, err := Compile(cfg, 1)
	if err != nil {
		t.Fatalf("a plan of %d limits with the provider's: %v", ratelimit.MaxChecks, err)
	}
	checks, _ := Checks(nil, p.Caller("sk-acme-alice"), p.Routes("gpt-4o-mini")[0], gatewayv1.EndpointChat, Cost{Tokens: 1}, Shared, "lease")
	if len(checks) != ratelimit.MaxChecks {
		t.Fatalf("a call passes %d limits; want %d, %d of them the provider's", len(checks), ratelimit.MaxChecks, 9)
	}
	acme.PerTenant = []gatewayv1.Limit{perHour}
	_, err = Compile(cfg, 1)
	if err == nil || !strings.Contains(err.Error(), `tenant "acme": a call to "openai" would pass 25 limits; at most 24`) {
		t.Errorf("a plan of one limit more: %v; want it refused, naming the tenant, the provider and the counts", err)
	}
}

// decide is m's decision on checks at now.
func decide(m *ratelimit.Memory, ctx context.Context, checks []ratelimit.Check, now time.Time) (ratelimit.Decision, error) {
	var d ratelimit.Decision
	err := m.Decide(ctx, checks, now, &d)
	return d, err
}
