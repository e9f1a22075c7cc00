package controllers

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// providerQuotaStatus returns pq's status after a compile and, unless u is
// nil, the gateways' latest usage. It starts from the current status, so
// that meta.SetStatusCondition keeps a condition's transition time while its
// status holds.
func providerQuotaStatus(pq *v1alpha1.ProviderQuota, res ProviderResult, u *usage.Totals, now time.Time) v1alpha1.ProviderQuotaStatus {
	st := pq.Status.DeepCopy()
	st.ObservedGeneration = pq.Generation
	meta.SetStatusCondition(&st.Conditions, readyCondition(res.Result, pq.Generation, now))
	st.EffectiveLimits = res.EffectiveLimits
	st.ReadyPods, st.ReadyGPUs = res.ReadyPods, res.ReadyGPUs
	if u != nil {
		meta.SetStatusCondition(&st.Conditions, usageCondition(u, pq.Generation, now))
		st.Usage, st.LastUsageTime = nil, nil
		if pu, ok := u.Providers[pq.Name]; ok {
			st.Usage, st.LastUsageTime = &pu, timeOrNil(u.Oldest)
		}
	}
	return *st
}

// tenantPlanStatus returns tp's status after a compile and, unless u is nil,
// the gateways' latest usage.
func tenantPlanStatus(tp *v1alpha1.TenantPlan, res PlanResult, u *usage.Totals, now time.Time) v1alpha1.TenantPlanStatus {
	st := tp.Status.DeepCopy()
	st.ObservedGeneration = tp.Generation
	meta.SetStatusCondition(&st.Conditions, readyCondition(res.Result, tp.Generation, now))
	st.TenantCount = ptr.To(res.TenantCount())
	if u == nil {
		st.Tenants = mergeKeys(st.Tenants, res.Tenants)
		return *st
	}
	meta.SetStatusCondition(&st.Conditions, usageCondition(u, tp.Generation, now))
	st.Tenants = tenantStatuses(res.Tenants, u)
	setPlanUsage(st, res.Tenants, u)
	return *st
}

// readyCondition is the Ready condition for a compile result.
func readyCondition(r Result, generation int64, now time.Time) metav1.Condition {
	status := metav1.ConditionFalse
	if r.Ready() {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: status, Reason: r.Reason, Message: truncate(r.Message, maxMessage),
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	}
}

// usageCondition says whether every gateway answered the latest poll. Its
// message never changes with the numbers, so that it is rewritten only when
// a gateway stops or starts answering.
func usageCondition(u *usage.Totals, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{
		Type: v1alpha1.ConditionUsageReported, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonGatewaysReported,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	}
	switch {
	case u.Gateways == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonNoGateways, "No gateway found to poll for usage."
	case len(u.Unanswered) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonGatewayUnreachable
		c.Message = truncate(fmt.Sprintf("%d of %s did not answer; usage counts their last reports, if any: %s",
			len(u.Unanswered), countOf(u.Gateways, "gateway"), strings.Join(u.Unanswered, "; ")), maxMessage)
	default:
		c.Message = fmt.Sprintf("Usage summed over %s.", countOf(u.Gateways, "gateway"))
	}
	return c
}

// mergeKeys returns the tenants' statuses with the key counts of a compile,
// keeping the usage they showed.
func mergeKeys(old []v1alpha1.TenantStatus, tenants []TenantResult) []v1alpha1.TenantStatus {
	byName := map[string]v1alpha1.TenantStatus{}
	for _, ts := range old {
		byName[ts.Name] = ts
	}
	out := make([]v1alpha1.TenantStatus, len(tenants))
	for i, t := range tenants {
		out[i] = byName[t.Name]
		out[i].Name, out[i].Keys = t.Name, t.Keys
	}
	return out
}

// tenantStatuses returns each tenant's keys and usage.
func tenantStatuses(tenants []TenantResult, u *usage.Totals) []v1alpha1.TenantStatus {
	out := make([]v1alpha1.TenantStatus, len(tenants))
	for i, t := range tenants {
		out[i] = v1alpha1.TenantStatus{Name: t.Name, Keys: t.Keys}
		tt, ok := u.Tenants[t.Name]
		if !ok {
			continue
		}
		out[i].Queued, out[i].Refused = tt.Queued, usage.RefusedCounts(tt.Refused)
		out[i].SpentThisPeriod = money(tt.SpentMicros)
		if tt.RemainingMicros != nil {
			out[i].BudgetRemaining = money(*tt.RemainingMicros)
		}
	}
	return out
}

// setPlanUsage sums the plan's tenants up: the most one spent, the least one
// has left, the earliest reset, and all that is queued and refused.
func setPlanUsage(st *v1alpha1.TenantPlanStatus, tenants []TenantResult, u *usage.Totals) {
	st.SpentThisPeriod, st.BudgetRemaining, st.ResetsAt, st.Queued, st.Refused = "", "", nil, 0, nil
	var spent int64
	var left *int64
	var resets time.Time
	var refused map[string]int64
	reported := false
	for _, t := range tenants {
		tt, ok := u.Tenants[t.Name]
		if !ok {
			continue
		}
		reported = true
		spent, st.Queued, refused = max(spent, tt.SpentMicros), st.Queued+tt.Queued, usage.AddRefused(refused, tt.Refused)
		if r := tt.RemainingMicros; r != nil && (left == nil || *r < *left) {
			left = r
		}
		if !tt.ResetsAt.IsZero() && (resets.IsZero() || tt.ResetsAt.Before(resets)) {
			resets = tt.ResetsAt
		}
	}
	if !reported {
		return
	}
	st.SpentThisPeriod, st.Refused, st.ResetsAt = money(spent), usage.RefusedCounts(refused), timeOrNil(resets)
	if left != nil {
		st.BudgetRemaining = money(*left)
	}
}

func money(micros int64) v1alpha1.Money {
	return v1alpha1.Money(gatewayv1.MoneyFromMicro(micros))
}

// timeOrNil returns t to the second, as the API server stores it, so that an
// unchanged time compares equal; the zero time is nil.
func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.Truncate(time.Second)}
}

// readyEvent returns the event a change of the Ready condition deserves:
// Normal when the object became Ready, Warning when it stopped being Ready
// or is not Ready for a new reason. ok is false when nothing changed that a
// person should hear about.
func readyEvent(before, after []metav1.Condition) (eventType, reason, note string, ok bool) {
	was := meta.FindStatusCondition(before, v1alpha1.ConditionReady)
	now := meta.FindStatusCondition(after, v1alpha1.ConditionReady)
	if now == nil || (was != nil && was.Status == now.Status && was.Reason == now.Reason) {
		return "", "", "", false
	}
	eventType = "Warning"
	if now.Status == metav1.ConditionTrue {
		eventType = "Normal"
	}
	return eventType, now.Reason, now.Message, true
}
