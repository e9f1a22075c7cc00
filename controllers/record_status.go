package controllers

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// The keys of the record's windows that status reads, less the scope's
// hash tag (see the gateway's policy package, which makes them).
const (
	budgetKey            = "tenant:budget"
	providerMonthKey     = "provider:microdollars:month"
	maxRecordedWindowKey = 128 // the CRD's maxLength of a recorded window's name
)

// findScope returns the record's scope named name. The record's scopes are
// sorted by name.
func findScope(rec *gatewayv1.Record, name string) (gatewayv1.ScopeRecord, bool) {
	if rec == nil {
		return gatewayv1.ScopeRecord{}, false
	}
	i, ok := slices.BinarySearchFunc(rec.Scopes, name, func(s gatewayv1.ScopeRecord, name string) int { return cmp.Compare(s.Scope, name) })
	if !ok {
		return gatewayv1.ScopeRecord{}, false
	}
	return rec.Scopes[i], true
}

// currentUse returns what a scope's window key used in the window that ends
// first after now, and when it ends; ok is false when no such window holds
// the key.
func currentUse(s gatewayv1.ScopeRecord, key string, now time.Time) (used int64, endsAt time.Time, ok bool) {
	for _, w := range s.Windows {
		n, has := w.Used[key]
		if has && w.EndsAt.After(now) && (!ok || w.EndsAt.Time.Before(endsAt)) {
			used, endsAt, ok = n, w.EndsAt.Time, true
		}
	}
	return used, endsAt, ok
}

// tenantRecord returns what the record holds of a tenant at now, for its
// status: the scope's version and when it was taken, the tenant's own and
// its endpoints' windows that have not ended, and how many of its users
// have one. Nil when the record holds no scope of the tenant.
func tenantRecord(rec *gatewayv1.Record, tenant string, now time.Time) *v1alpha1.TenantRecord {
	s, ok := findScope(rec, tenantScope(tenant))
	if !ok {
		return nil
	}
	out := &v1alpha1.TenantRecord{Version: s.Version, TakenAt: timeOrNil(s.TakenAt.Time)}
	windows, users := map[string]bool{}, map[string]bool{}
	for _, w := range s.Windows {
		if !w.EndsAt.After(now) {
			continue
		}
		for key := range w.Used {
			if user, ok := windowUser(key); ok {
				users[user] = true
			} else if tenantWindow(key) {
				windows[key] = true
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(windows)) {
		used, endsAt, _ := currentUse(s, key, now)
		out.Windows = append(out.Windows, v1alpha1.RecordedWindow{Name: key, Used: used, ResetsAt: recordedTime(endsAt)})
	}
	if len(out.Windows) > v1alpha1.MaxRecordedWindows {
		out.Windows = out.Windows[:v1alpha1.MaxRecordedWindows]
	}
	out.Users = int32(min(len(users), 1<<31-1))
	return out
}

// tenantWindow reports whether a key is the tenant's own window or an
// endpoint's, with a name status can hold.
func tenantWindow(key string) bool {
	return (strings.HasPrefix(key, "tenant:") || strings.HasPrefix(key, "endpoint:")) && len(key) <= maxRecordedWindowKey
}

// windowUser returns the user of a per-user window's key,
// "user:<user>:<dimension>:<per>" with ":2", ":3" for a repeated limit; ok
// is false for another key. A user's name may hold colons.
func windowUser(key string) (user string, ok bool) {
	rest, ok := strings.CutPrefix(key, "user:")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, ":")
	if n := len(parts); n > 3 {
		if _, err := strconv.Atoi(parts[n-1]); err == nil {
			parts = parts[:n-1]
		}
	}
	if len(parts) < 3 {
		return "", false
	}
	return strings.Join(parts[:len(parts)-2], ":"), true
}

// withRecordedSpend returns u with each tenant's spend no lower than the
// record's budget window for the period the gateways report, and what is
// left of the budget lowered to match: a store that came back empty
// reports less than was spent until the gateways re-seed it. u itself is
// not modified.
func withRecordedSpend(u *usage.Totals, now time.Time) *usage.Totals {
	if u.Record == nil {
		return u
	}
	out := *u
	out.Tenants = make(map[string]usage.TenantTotals, len(u.Tenants))
	for name, tt := range u.Tenants {
		out.Tenants[name] = raiseSpend(tt, recordedBudget(u.Record, name, tt.ResetsAt, now))
	}
	return &out
}

// recordedBudget is what the record holds of a tenant's budget window that
// ends at resetsAt, in micro-dollars, or 0.
func recordedBudget(rec *gatewayv1.Record, tenant string, resetsAt, now time.Time) int64 {
	s, ok := findScope(rec, tenantScope(tenant))
	if !ok || resetsAt.IsZero() {
		return 0
	}
	used, endsAt, ok := currentUse(s, budgetKey, now)
	if !ok || !endsAt.Equal(resetsAt) {
		return 0
	}
	return used
}

// raiseSpend returns tt with its spend raised to recorded micro-dollars,
// and what is left of its budget lowered by as much, never below zero.
func raiseSpend(tt usage.TenantTotals, recorded int64) usage.TenantTotals {
	more := recorded - tt.SpentMicros
	if more <= 0 {
		return tt
	}
	tt.SpentMicros = recorded
	if tt.RemainingMicros != nil {
		left := max(*tt.RemainingMicros-more, 0)
		tt.RemainingMicros = &left
	}
	return tt
}

// recordedMonthSpend is what the record holds of a provider's spend
// against its month cap at now, in dollars: "0" when the record holds the
// provider but no spend this month, "" when the provider has no month cap
// or the record holds nothing of it.
func recordedMonthSpend(pq *v1alpha1.ProviderQuota, rec *gatewayv1.Record, now time.Time) v1alpha1.Money {
	if pq.Spec.Spend == nil || pq.Spec.Spend.PerMonth == "" {
		return ""
	}
	s, ok := findScope(rec, pq.Name)
	if !ok {
		return ""
	}
	used, _, _ := currentUse(s, providerMonthKey, now)
	return money(used)
}

// recordedToday is what the record holds of a provider's limits per day at
// now: each window of its day that has not ended, by its key
// (provider:<dimension>:day), in the order of providerLimitFields; none when
// the provider has no limit per day or the record holds none of today's.
func recordedToday(pq *v1alpha1.ProviderQuota, rec *gatewayv1.Record, now time.Time) []v1alpha1.RecordedWindow {
	s, ok := findScope(rec, pq.Name)
	if !ok || pq.Spec.Limits == nil {
		return nil
	}
	var out []v1alpha1.RecordedWindow
	for _, f := range providerLimitFields {
		if f.per != gatewayv1.PeriodDay || *f.of(pq.Spec.Limits) <= 0 {
			continue
		}
		key := "provider:" + string(f.dimension) + ":day"
		if used, endsAt, ok := currentUse(s, key, now); ok {
			out = append(out, v1alpha1.RecordedWindow{Name: key, Used: used, ResetsAt: recordedTime(endsAt)})
		}
	}
	return out
}

// recordedTime is t as a status holds it: to the second.
func recordedTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
