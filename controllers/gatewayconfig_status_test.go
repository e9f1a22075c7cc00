package controllers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

func TestProviderQuotaStatus(t *testing.T) {
	now := epoch.Add(time.Hour)
	compiled := ProviderResult{
		Result:          Result{Reason: v1alpha1.ReasonCompiled, Message: "In."},
		EffectiveLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
	}
	missing := ProviderResult{Result: Result{Reason: v1alpha1.ReasonKeySecretMissing, Message: `Secret "k" not found.`}}
	readySince := func(status metav1.ConditionStatus, reason, msg string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(at)}
	}
	withStatus := func(st v1alpha1.ProviderQuotaStatus) *v1alpha1.ProviderQuota {
		pq := quota("openai", 0, "gpt-4o")
		pq.Generation, pq.Status = 3, st
		return &pq
	}
	polled := &usage.Totals{
		Providers: map[string]v1alpha1.ProviderUsage{"openai": {RequestsLastMinute: 7}},
		Oldest:    now.Add(-1500 * time.Millisecond), Gateways: 2,
	}
	usageCond := metav1.Condition{Type: v1alpha1.ConditionUsageReported, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonGatewaysReported,
		Message: "Usage summed over 2 gateways.", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)}
	asSpec := metav1.Condition{Type: v1alpha1.ConditionLimitsBelowSpec, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonLimitsAsSpec,
		Message: "No gateway read a limit lower than spec.limits in the provider's answers.", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)}
	below := metav1.Condition{Type: v1alpha1.ConditionLimitsBelowSpec, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProviderReportsLower,
		Message:            "The provider reports 60 requests per minute, lower than spec.limits; the gateways pace to what it reports.",
		ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(epoch)}
	throttled := &usage.Totals{
		Providers: map[string]v1alpha1.ProviderUsage{"openai": {RequestsLastMinute: 7}},
		Feedback:  map[string]usage.ProviderFeedback{"openai": {Learned: gatewayv1.LearnedLimits{RequestsPerMinute: 60}, ThrottledInFlight: 3}},
		Oldest:    now.Add(-1500 * time.Millisecond), Gateways: 2,
	}

	tests := []struct {
		name  string
		pq    *v1alpha1.ProviderQuota
		res   ProviderResult
		usage *usage.Totals
		want  v1alpha1.ProviderQuotaStatus
	}{{
		name: "first compile",
		pq:   withStatus(v1alpha1.ProviderQuotaStatus{}),
		res:  compiled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now)},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
		},
	}, {
		name: "still Ready keeps its transition time",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{ObservedGeneration: 2,
			Conditions: []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", epoch)}}),
		res: compiled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", epoch)},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
		},
	}, {
		name: "a lost key drops the effective limits",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{ObservedGeneration: 3, EffectiveLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
			Conditions: []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", epoch)}}),
		res: missing,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionFalse, v1alpha1.ReasonKeySecretMissing, `Secret "k" not found.`, now)},
		},
	}, {
		name:  "usage from the gateways, to the second",
		pq:    withStatus(v1alpha1.ProviderQuotaStatus{}),
		res:   compiled,
		usage: polled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, asSpec},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
			Usage:              &v1alpha1.ProviderUsage{RequestsLastMinute: 7},
			LastUsageTime:      &metav1.Time{Time: now.Add(-2 * time.Second)},
		},
	}, {
		name: "no gateway reports the provider: its old usage goes",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{
			Usage: &v1alpha1.ProviderUsage{RequestsLastMinute: 3}, LastUsageTime: &metav1.Time{Time: epoch}}),
		res:   compiled,
		usage: &usage.Totals{Gateways: 2, Oldest: now},
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, asSpec},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
		},
	}, {
		name: "the provider reports lower limits and throttles: the effective limits are lowered",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{
			Conditions: []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, below}}),
		res:   compiled,
		usage: throttled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, below},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 60, MaxInFlight: 3},
			LearnedLimits:      &v1alpha1.ProviderLimits{RequestsPerMinute: 60},
			Usage:              &v1alpha1.ProviderUsage{RequestsLastMinute: 7},
			LastUsageTime:      &metav1.Time{Time: now.Add(-2 * time.Second)},
		},
	}, {
		name: "the provider reports them no longer: the effective limits are raised back",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{
			Conditions:      []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, below},
			EffectiveLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 60, MaxInFlight: 3}, LearnedLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 60}}),
		res:   compiled,
		usage: polled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, asSpec},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
			Usage:              &v1alpha1.ProviderUsage{RequestsLastMinute: 7},
			LastUsageTime:      &metav1.Time{Time: now.Add(-2 * time.Second)},
		},
	}, {
		name: "without a poller the learned limits stay in force",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{
			Conditions:    []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), below},
			LearnedLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 60}}),
		res: compiled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), below},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 60},
			LearnedLimits:      &v1alpha1.ProviderLimits{RequestsPerMinute: 60},
		},
	}, {
		name: "the month's spend the record holds, against the month cap",
		pq: func() *v1alpha1.ProviderQuota {
			pq := withStatus(v1alpha1.ProviderQuotaStatus{})
			pq.Spec.Spend = &v1alpha1.Spend{PerMonth: "1000"}
			return pq
		}(),
		res: compiled,
		usage: &usage.Totals{Gateways: 2, Oldest: now, Record: recordOf(
			recordScope("openai", 3, ending(monthEnd, map[string]int64{"provider:microdollars:month": 250_000_000})))},
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration:     3,
			Conditions:             []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond, asSpec},
			EffectiveLimits:        &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
			RecordedSpendThisMonth: "250",
		},
	}, {
		name: "input and output tokens a minute learned, and today's requests recorded",
		pq: func() *v1alpha1.ProviderQuota {
			pq := withStatus(v1alpha1.ProviderQuotaStatus{})
			pq.Spec.Limits, pq.Spec.HeadroomPercent = &v1alpha1.ProviderLimits{RequestsPerDay: 1000}, 90
			return pq
		}(),
		res: ProviderResult{Result: compiled.Result, EffectiveLimits: &v1alpha1.ProviderLimits{
			RequestsPerMinute: 95, InputTokensPerMinute: 90_000, OutputTokensPerMinute: 18_000, RequestsPerDay: 900}},
		usage: &usage.Totals{Gateways: 2, Oldest: now,
			Providers: map[string]v1alpha1.ProviderUsage{"openai": {InputTokensLastMinute: 4_000, OutputTokensLastMinute: 900}},
			Feedback:  map[string]usage.ProviderFeedback{"openai": {Learned: gatewayv1.LearnedLimits{InputTokensPerMinute: 50_000, OutputTokensPerMinute: 8_000}}},
			Record:    recordOf(recordScope("openai", 3, ending(monthEnd, map[string]int64{"provider:requests:day": 12})))},
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions: []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now), usageCond,
				{Type: v1alpha1.ConditionLimitsBelowSpec, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProviderReportsLower,
					Message:            "The provider reports 50000 input tokens per minute and 8000 output tokens per minute, lower than spec.limits; the gateways pace to what it reports.",
					ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)}},
			EffectiveLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 95, InputTokensPerMinute: 45_000, OutputTokensPerMinute: 7_200, RequestsPerDay: 900},
			LearnedLimits:   &v1alpha1.ProviderLimits{InputTokensPerMinute: 50_000, OutputTokensPerMinute: 8_000},
			Usage:           &v1alpha1.ProviderUsage{InputTokensLastMinute: 4_000, OutputTokensLastMinute: 900}, LastUsageTime: &metav1.Time{Time: now},
			RecordedToday: []v1alpha1.RecordedWindow{{Name: "provider:requests:day", Used: 12, ResetsAt: monthEnd}},
		},
	}, {
		name: "without a poller the usage stays",
		pq: withStatus(v1alpha1.ProviderQuotaStatus{
			Usage: &v1alpha1.ProviderUsage{RequestsLastMinute: 3}, LastUsageTime: &metav1.Time{Time: epoch}}),
		res: compiled,
		want: v1alpha1.ProviderQuotaStatus{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{readySince(metav1.ConditionTrue, v1alpha1.ReasonCompiled, "In.", now)},
			EffectiveLimits:    &v1alpha1.ProviderLimits{RequestsPerMinute: 95},
			Usage:              &v1alpha1.ProviderUsage{RequestsLastMinute: 3}, LastUsageTime: &metav1.Time{Time: epoch},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pq.DeepCopy()
			got := providerQuotaStatus(tc.pq, tc.res, tc.usage, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.pq); diff != "" {
				t.Errorf("providerQuotaStatus changed its argument (-before +after):\n%s", diff)
			}
		})
	}
}

func TestTenantPlanStatus(t *testing.T) {
	now := epoch.Add(time.Hour)
	resets := epoch.Add(24 * time.Hour)
	res := PlanResult{
		Result: Result{Reason: v1alpha1.ReasonKeySecretMissing, Message: "1 of 3 tenants..."},
		Tenants: []TenantResult{
			{Name: "acme", Keys: 2, Compiled: true},
			{Name: "globex", Keys: 1, Compiled: true},
			{Name: "initech"},
		},
	}
	tp := plan("pro", 0, []string{"acme", "globex", "initech"}, []string{"openai"})
	tp.Generation = 2
	tp.Status.Tenants = []v1alpha1.TenantStatus{{Name: "acme", Keys: 1, Queued: 9}}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonKeySecretMissing,
		Message: "1 of 3 tenants...", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(now)}

	tests := []struct {
		name  string
		usage *usage.Totals
		want  v1alpha1.TenantPlanStatus
	}{{
		name: "without a poller: the key counts, and the usage as it was",
		want: v1alpha1.TenantPlanStatus{
			ObservedGeneration: 2, Conditions: []metav1.Condition{ready}, TenantCount: ptrTo[int32](2),
			Tenants: []v1alpha1.TenantStatus{{Name: "acme", Keys: 2, Queued: 9}, {Name: "globex", Keys: 1}, {Name: "initech"}},
		},
	}, {
		name: "the tenants' usage and its summary",
		usage: &usage.Totals{Gateways: 1, Unanswered: []string{"gw-2: connection refused"}, Tenants: map[string]usage.TenantTotals{
			"acme":   {Queued: 2, Refused: map[string]int64{"user_requests": 1}, SpentMicros: 40_000_000, RemainingMicros: ptrTo[int64](60_000_000), ResetsAt: resets},
			"globex": {Queued: 1, Refused: map[string]int64{"user_requests": 2}, SpentMicros: 90_500_000, RemainingMicros: ptrTo[int64](9_500_000), ResetsAt: resets},
		}},
		want: v1alpha1.TenantPlanStatus{
			ObservedGeneration: 2, TenantCount: ptrTo[int32](2),
			Conditions: []metav1.Condition{ready, {
				Type: v1alpha1.ConditionUsageReported, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonGatewayUnreachable,
				Message:            "1 of 1 gateway did not answer; usage counts their last reports, if any: gw-2: connection refused",
				ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(now),
			}},
			SpentThisPeriod: "90.5", BudgetRemaining: "9.5", ResetsAt: &metav1.Time{Time: resets}, Queued: 3,
			Refused: []v1alpha1.RefusedCount{{Reason: "user_requests", Count: 3}},
			Tenants: []v1alpha1.TenantStatus{
				{Name: "acme", Keys: 2, Queued: 2, SpentThisPeriod: "40", BudgetRemaining: "60", Refused: []v1alpha1.RefusedCount{{Reason: "user_requests", Count: 1}}},
				{Name: "globex", Keys: 1, Queued: 1, SpentThisPeriod: "90.5", BudgetRemaining: "9.5", Refused: []v1alpha1.RefusedCount{{Reason: "user_requests", Count: 2}}},
				{Name: "initech"},
			},
		},
	}, {
		name:  "no gateway found",
		usage: &usage.Totals{},
		want: v1alpha1.TenantPlanStatus{
			ObservedGeneration: 2, TenantCount: ptrTo[int32](2),
			Conditions: []metav1.Condition{ready, {
				Type: v1alpha1.ConditionUsageReported, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoGateways,
				Message: "No gateway found to poll for usage.", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(now),
			}},
			Tenants: []v1alpha1.TenantStatus{{Name: "acme", Keys: 2}, {Name: "globex", Keys: 1}, {Name: "initech"}},
		},
	}, {
		name: "a store that came back empty: the record's spend and windows",
		usage: &usage.Totals{Gateways: 1, Tenants: map[string]usage.TenantTotals{
			"acme":   {SpentMicros: 1_000_000, RemainingMicros: ptrTo[int64](99_000_000), ResetsAt: resets},
			"globex": {SpentMicros: 2_000_000, RemainingMicros: ptrTo[int64](98_000_000), ResetsAt: resets},
		}, Record: recordOf(
			recordScope("tenant:acme", 6, ending(metav1.NewTime(resets), map[string]int64{"tenant:budget": 40_000_000, "tenant:requests:day": 80, "user:alice:requests:day": 8})),
		)},
		want: v1alpha1.TenantPlanStatus{
			ObservedGeneration: 2, TenantCount: ptrTo[int32](2),
			Conditions: []metav1.Condition{ready, {
				Type: v1alpha1.ConditionUsageReported, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonGatewaysReported,
				Message: "Usage summed over 1 gateway.", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(now),
			}},
			SpentThisPeriod: "40", BudgetRemaining: "60", ResetsAt: &metav1.Time{Time: resets},
			Tenants: []v1alpha1.TenantStatus{
				{Name: "acme", Keys: 2, SpentThisPeriod: "40", BudgetRemaining: "60", Record: &v1alpha1.TenantRecord{
					Version: 6, TakenAt: &metav1.Time{Time: epoch}, Users: 1, Windows: []v1alpha1.RecordedWindow{
						{Name: "tenant:budget", Used: 40_000_000, ResetsAt: metav1.NewTime(resets)},
						{Name: "tenant:requests:day", Used: 80, ResetsAt: metav1.NewTime(resets)},
					}}},
				{Name: "globex", Keys: 1, SpentThisPeriod: "2", BudgetRemaining: "98"},
				{Name: "initech"},
			},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tenantPlanStatus(&tp, res, tc.usage, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadyEvent(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "m"}}
	}
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          string // type and reason; empty for no event
	}{
		{"first Ready", nil, cond(metav1.ConditionTrue, v1alpha1.ReasonCompiled), "Normal Compiled"},
		{"first not Ready", nil, cond(metav1.ConditionFalse, v1alpha1.ReasonKeySecretMissing), "Warning KeySecretMissing"},
		{"still Ready", cond(metav1.ConditionTrue, v1alpha1.ReasonCompiled), cond(metav1.ConditionTrue, v1alpha1.ReasonCompiled), ""},
		{"a new reason", cond(metav1.ConditionFalse, v1alpha1.ReasonKeySecretMissing), cond(metav1.ConditionFalse, v1alpha1.ReasonUnknownProvider), "Warning UnknownProvider"},
		{"mended", cond(metav1.ConditionFalse, v1alpha1.ReasonKeySecretMissing), cond(metav1.ConditionTrue, v1alpha1.ReasonCompiled), "Normal Compiled"},
		{"gateways loading a new configuration", cond(metav1.ConditionTrue, v1alpha1.ReasonCompiled), cond(metav1.ConditionFalse, v1alpha1.ReasonGatewaysBehind), "Normal GatewaysBehind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eventType, reason, _, ok := readyEvent(tc.before, tc.after)
			got := ""
			if ok {
				got = eventType + " " + reason
			}
			if got != tc.want {
				t.Errorf("readyEvent = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestReadyOnceEveryGatewayLoadedIt: a compiled object is Ready only once every gateway that
// answered reports the configuration written; one that reports another, by name, holds it at
// GatewaysBehind, and one that does not say, or a result that is no compile, is left alone.
func TestReadyOnceEveryGatewayLoadedIt(t *testing.T) {
	u := usage.Sum([]usage.GatewayReport{
		{Gateway: "gw-a", Usage: &gatewayv1.Usage{ConfigSHA256: "new"}},
		{Gateway: "gw-c", Usage: &gatewayv1.Usage{ConfigSHA256: "old"}},
		{Gateway: "gw-b", Usage: &gatewayv1.Usage{ConfigSHA256: "older"}},
		{Gateway: "gw-d", Usage: &gatewayv1.Usage{}},                                             // does not say
		{Gateway: "gw-e", Usage: &gatewayv1.Usage{ConfigSHA256: "old"}, Err: errors.New("down")}, // its last answer
	})
	if got := u.Behind("new"); !slices.Equal(got, []string{"gw-b", "gw-c"}) {
		t.Errorf("Behind = %v; want gw-b and gw-c, sorted", got)
	}
	if got := u.Behind(""); got != nil {
		t.Errorf("Behind of no configuration written = %v; want none", got)
	}
	compiled := Result{Reason: v1alpha1.ReasonCompiled, Message: "Compiled."}
	got := loadedBy(compiled, u.Behind("new"))
	if got.Reason != v1alpha1.ReasonGatewaysBehind || !strings.Contains(got.Message, "2 of the gateways that answered have not loaded this configuration yet: gw-b, gw-c") {
		t.Errorf("loadedBy = %+v; want GatewaysBehind naming gw-b and gw-c", got)
	}
	if got := loadedBy(compiled, nil); got != compiled {
		t.Errorf("loadedBy with every gateway on it = %+v; want Compiled", got)
	}
	missing := Result{Reason: v1alpha1.ReasonKeySecretMissing, Message: "m"}
	if got := loadedBy(missing, []string{"gw-b"}); got != missing {
		t.Errorf("loadedBy of a result that is no compile = %+v; want it as it was", got)
	}
}

func TestLimitsEvent(t *testing.T) {
	cond := func(status metav1.ConditionStatus, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionLimitsBelowSpec, Status: status, Reason: "R", Message: msg}}
	}
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          string // "type reason", or "" for no event
	}{
		{"first seen as the spec", nil, cond(metav1.ConditionFalse, "as spec"), ""},
		{"first seen lower", nil, cond(metav1.ConditionTrue, "60 RPM"), "Warning R"},
		{"still lower, the same", cond(metav1.ConditionTrue, "60 RPM"), cond(metav1.ConditionTrue, "60 RPM"), ""},
		{"lower still", cond(metav1.ConditionTrue, "60 RPM"), cond(metav1.ConditionTrue, "30 RPM"), "Warning R"},
		{"back to the spec", cond(metav1.ConditionTrue, "60 RPM"), cond(metav1.ConditionFalse, "as spec"), "Normal R"},
		{"still as the spec", cond(metav1.ConditionFalse, "as spec"), cond(metav1.ConditionFalse, "as spec"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eventType, reason, _, ok := limitsEvent(tc.before, tc.after)
			got := ""
			if ok {
				got = eventType + " " + reason
			}
			if got != tc.want {
				t.Errorf("limitsEvent = %q; want %q", got, tc.want)
			}
		})
	}
}
