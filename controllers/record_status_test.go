package controllers

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// recordOf is a record of scopes, sorted as the poller keeps it.
func recordOf(scopes ...gatewayv1.ScopeRecord) *gatewayv1.Record {
	sortScopes(scopes)
	return &gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind, Scopes: scopes}
}

func TestTenantRecord(t *testing.T) {
	yesterday := metav1.NewTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	tomorrow := metav1.NewTime(midnight.Add(24 * time.Hour))
	taken := &metav1.Time{Time: epoch}
	many := map[string]int64{}
	for i := range v1alpha1.MaxRecordedWindows + 5 {
		many[fmt.Sprintf("tenant:requests:day:%d", i+2)] = 1
	}
	tests := []struct {
		name string
		rec  *gatewayv1.Record
		want *v1alpha1.TenantRecord
	}{{
		name: "no record",
	}, {
		name: "no scope of the tenant",
		rec:  recordOf(recordScope("tenant:globex", 1)),
	}, {
		name: "a scope with no window: its version",
		rec:  recordOf(recordScope("tenant:acme", 4)),
		want: &v1alpha1.TenantRecord{Version: 4, TakenAt: taken},
	}, {
		name: "the tenant's and its endpoints' windows by name, its users counted",
		rec: recordOf(recordScope("tenant:acme", 4,
			ending(midnight, map[string]int64{
				"tenant:requests:day": 90, "tenant:requests:day:2": 91, "endpoint:chat:tokens:day": 5000,
				"user:alice:requests:day": 3, "user:alice:tokens:day": 30, "user:bob:requests:day:2": 1, "user:svc:batch:requests:day": 2,
			}),
			ending(monthEnd, map[string]int64{"tenant:budget": 12_500_000, "user:carol:microdollars:month": 100}),
		)),
		want: &v1alpha1.TenantRecord{Version: 4, TakenAt: taken, Users: 4, Windows: []v1alpha1.RecordedWindow{
			{Name: "endpoint:chat:tokens:day", Used: 5000, ResetsAt: midnight},
			{Name: "tenant:budget", Used: 12_500_000, ResetsAt: monthEnd},
			{Name: "tenant:requests:day", Used: 90, ResetsAt: midnight},
			{Name: "tenant:requests:day:2", Used: 91, ResetsAt: midnight},
		}},
	}, {
		name: "windows that ended are left out; of two that have not, the one that ends first",
		rec: recordOf(recordScope("tenant:acme", 4,
			ending(yesterday, map[string]int64{"tenant:requests:day": 500, "user:dave:requests:day": 1}),
			ending(midnight, map[string]int64{"tenant:requests:day": 90}),
			ending(tomorrow, map[string]int64{"tenant:requests:day": 7}),
		)),
		want: &v1alpha1.TenantRecord{Version: 4, TakenAt: taken, Windows: []v1alpha1.RecordedWindow{
			{Name: "tenant:requests:day", Used: 90, ResetsAt: midnight},
		}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tenantRecord(tc.rec, "acme", epoch)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tenantRecord (-want +got):\n%s", diff)
			}
		})
	}

	// A record of more windows than status holds (limits since removed)
	// shows the first by name.
	got := tenantRecord(recordOf(recordScope("tenant:acme", 4, ending(midnight, many))), "acme", epoch).Windows
	if len(got) != v1alpha1.MaxRecordedWindows || got[0].Name != "tenant:requests:day:10" {
		t.Errorf("%d windows, the first %+v; want %d, from tenant:requests:day:10", len(got), got[0], v1alpha1.MaxRecordedWindows)
	}
}

func TestWindowUser(t *testing.T) {
	tests := []struct {
		key, user string
		ok        bool
	}{
		{"user:alice:requests:day", "alice", true},
		{"user:alice:tokens:month:3", "alice", true},
		{"user:svc:batch:requests:day", "svc:batch", true},
		{"user:7:requests:day", "7", true},
		{"user:a:7:requests:day", "a:7", true},
		{"tenant:requests:day", "", false},
		{"user:requests:day", "", false},
	}
	for _, tc := range tests {
		if user, ok := windowUser(tc.key); user != tc.user || ok != tc.ok {
			t.Errorf("windowUser(%q) = %q, %t; want %q, %t", tc.key, user, ok, tc.user, tc.ok)
		}
	}
}

func TestWithRecordedSpend(t *testing.T) {
	resets := monthEnd.Time
	rec := recordOf(
		recordScope("tenant:acme", 4, ending(monthEnd, map[string]int64{"tenant:budget": 12_500_000})),
		recordScope("tenant:globex", 2, ending(midnight, map[string]int64{"tenant:budget": 3_000_000})),
	)
	tests := []struct {
		name     string
		reported usage.TenantTotals
		want     usage.TenantTotals
	}{{
		name:     "an empty store: the record's spend, and the budget left lowered to match",
		reported: usage.TenantTotals{SpentMicros: 100, RemainingMicros: ptrTo[int64](99_999_900), ResetsAt: resets},
		want:     usage.TenantTotals{SpentMicros: 12_500_000, RemainingMicros: ptrTo[int64](87_500_000), ResetsAt: resets},
	}, {
		name:     "a store ahead of the record: the store's",
		reported: usage.TenantTotals{SpentMicros: 13_000_000, RemainingMicros: ptrTo[int64](87_000_000), ResetsAt: resets},
		want:     usage.TenantTotals{SpentMicros: 13_000_000, RemainingMicros: ptrTo[int64](87_000_000), ResetsAt: resets},
	}, {
		name:     "never less than nothing left",
		reported: usage.TenantTotals{SpentMicros: 0, RemainingMicros: ptrTo[int64](10_000_000), ResetsAt: resets},
		want:     usage.TenantTotals{SpentMicros: 12_500_000, RemainingMicros: ptrTo[int64](0), ResetsAt: resets},
	}, {
		name:     "the record's window for another period does not count",
		reported: usage.TenantTotals{SpentMicros: 100, RemainingMicros: ptrTo[int64](999_900), ResetsAt: midnight.Time},
		want:     usage.TenantTotals{SpentMicros: 100, RemainingMicros: ptrTo[int64](999_900), ResetsAt: midnight.Time},
	}, {
		name:     "no budget: no budget window",
		reported: usage.TenantTotals{SpentMicros: 100},
		want:     usage.TenantTotals{SpentMicros: 100},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &usage.Totals{Tenants: map[string]usage.TenantTotals{"acme": tc.reported}, Record: rec}
			got := withRecordedSpend(u, epoch)
			if diff := cmp.Diff(tc.want, got.Tenants["acme"]); diff != "" {
				t.Errorf("withRecordedSpend (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reported, u.Tenants["acme"]); diff != "" {
				t.Errorf("withRecordedSpend modified its argument (-was +now):\n%s", diff)
			}
		})
	}
}

func TestRecordedMonthSpend(t *testing.T) {
	capped := quota("openai", 0, "gpt-4o")
	capped.Spec.Spend = &v1alpha1.Spend{PerMonth: "1000"}
	uncapped := quota("openai", 0, "gpt-4o")
	spent := recordOf(recordScope("openai", 2, ending(monthEnd, map[string]int64{"provider:microdollars:month": 1_250_000})))
	tests := []struct {
		name string
		pq   v1alpha1.ProviderQuota
		rec  *gatewayv1.Record
		want v1alpha1.Money
	}{
		{"a month cap and its spend recorded", capped, spent, "1.25"},
		{"a month cap and nothing spent", capped, recordOf(recordScope("openai", 2)), "0"},
		{"a month cap the record holds nothing of", capped, recordOf(recordScope("llama", 2)), ""},
		{"no month cap", uncapped, spent, ""},
		{"no record", capped, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := recordedMonthSpend(&tc.pq, tc.rec, epoch); got != tc.want {
				t.Errorf("recordedMonthSpend = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestRecordedToday reads a provider's day in Los Angeles from the record: at noon UTC on March
// 1st it is 4:00 there, and its day ends at 8:00 UTC on March 2nd; a window of the day before,
// and one of a limit the provider no longer has, are left out.
func TestRecordedToday(t *testing.T) {
	pq := quota("gemini", 0, "gemini-2.5-pro")
	pq.Spec.TimeZone = "America/Los_Angeles"
	pq.Spec.Limits = &v1alpha1.ProviderLimits{RequestsPerMinute: 150, RequestsPerDay: 1000, OutputTokensPerDay: 50_000}
	today := metav1.NewTime(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	yesterday := metav1.NewTime(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
	rec := recordOf(recordScope("gemini", 4,
		ending(yesterday, map[string]int64{"provider:requests:day": 999}),
		ending(today, map[string]int64{"provider:requests:day": 420, "provider:outputTokens:day": 12_000, "provider:tokens:day": 7})))
	want := []v1alpha1.RecordedWindow{
		{Name: "provider:requests:day", Used: 420, ResetsAt: today},
		{Name: "provider:outputTokens:day", Used: 12_000, ResetsAt: today},
	}
	if diff := cmp.Diff(want, recordedToday(&pq, rec, epoch)); diff != "" {
		t.Errorf("recordedToday (-want +got):\n%s", diff)
	}
	if got := recordedToday(&pq, recordOf(recordScope("llama", 1)), epoch); got != nil {
		t.Errorf("recordedToday of a record without the provider = %v; want none", got)
	}
	pq.Spec.Limits = &v1alpha1.ProviderLimits{RequestsPerMinute: 150}
	if got := recordedToday(&pq, rec, epoch); got != nil {
		t.Errorf("recordedToday of a provider without a limit per day = %v; want none", got)
	}
}
