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
	setActive(&st.Conditions, res.Active, pq.Generation, now)
	st.ReadyPods, st.ReadyGPUs = res.ReadyPods, res.ReadyGPUs
	var throttledInFlight int64
	if u != nil {
		meta.SetStatusCondition(&st.Conditions, usageCondition(u, pq.Generation, now))
		st.Usage, st.LastUsageTime = nil, nil
		if pu, ok := u.Providers[pq.Name]; ok {
			st.Usage, st.LastUsageTime = &pu, timeOrNil(u.Oldest)
		}
		st.RecordedSpendThisMonth = recordedMonthSpend(pq, u.Record, now)
		st.RecordedToday = recordedToday(pq, u.Record, now)
		fb := u.Feedback[pq.Name]
		st.LearnedLimits, throttledInFlight = learnedLimits(fb.Learned), fb.ThrottledInFlight
		meta.SetStatusCondition(&st.Conditions, limitsCondition(st.LearnedLimits, pq.Generation, now))
	}
	st.EffectiveLimits = lowered(res.EffectiveLimits, st.LearnedLimits, throttledInFlight, pq.Spec.HeadroomPercent)
	return *st
}

// lowered returns the effective limits of a compile lowered to what the
// provider's answers taught: the learned limits, at the spec's headroom, in
// place of the spec's, and, when a gateway caps its calls in flight after a
// throttle, those caps summed (never above the compile's). A nil effective
// (not compiled) stays nil.
func lowered(effective, learned *v1alpha1.ProviderLimits, throttledInFlight int64, headroomPercent int32) *v1alpha1.ProviderLimits {
	if effective == nil || (learned == nil && throttledInFlight == 0) {
		return effective
	}
	out := *effective
	if learned != nil {
		headroom := gatewayv1.Provider{HeadroomPercent: headroomPercent}
		for _, f := range learnedFields() {
			*f.of(&out) = lowerOf(*f.of(&out), headroom.WithHeadroom(*f.of(learned)))
		}
	}
	out.MaxInFlight = lowerOf(out.MaxInFlight, throttledInFlight)
	return &out
}

// lowerOf is the lower of two limits, where zero is unlimited.
func lowerOf(a, b int64) int64 {
	if a == 0 || b == 0 {
		return max(a, b)
	}
	return min(a, b)
}

// limitsCondition says whether the provider reports limits lower than its
// spec's. Its message names them, so that it changes only when they do.
func limitsCondition(learned *v1alpha1.ProviderLimits, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{
		Type: v1alpha1.ConditionLimitsBelowSpec, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonLimitsAsSpec,
		Message:            "No gateway read a limit lower than spec.limits in the provider's answers.",
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	}
	if learned == nil {
		return c
	}
	var lower []string
	for _, f := range learnedFields() {
		if n := *f.of(learned); n > 0 {
			lower = append(lower, fmt.Sprintf("%d %s", n, f.words))
		}
	}
	c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonProviderReportsLower
	c.Message = fmt.Sprintf("The provider reports %s, lower than spec.limits; the gateways pace to what it reports.", strings.Join(lower, " and "))
	return c
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
	u = withRecordedSpend(u, now)
	st.Tenants = tenantStatuses(res.Tenants, u, now)
	setPlanUsage(st, res.Tenants, u)
	return *st
}

// loadedBy is a compile's result as Ready says it once the gateways are
// heard: a compiled object whose configuration gateways have not loaded yet
// (behind, by name) is GatewaysBehind, and any other result is as it was.
func loadedBy(r Result, behind []string) Result {
	if !r.Ready() || len(behind) == 0 {
		return r
	}
	return Result{Reason: v1alpha1.ReasonGatewaysBehind, Message: truncate(fmt.Sprintf(
		"Compiled, but %d of the gateways that answered %s not loaded this configuration yet: %s. A gateway loads it once its Pod sees the configuration's Secrets change, within about a minute.",
		len(behind), hasOrHave(len(behind)), strings.Join(behind, ", ")), maxMessage)}
}

// hasOrHave is the verb of a count of n.
func hasOrHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
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

// setActive sets the Active condition of a self-hosted provider from its
// compile's active, and removes it for a hosted one (active nil).
func setActive(conditions *[]metav1.Condition, active *Result, generation int64, now time.Time) {
	if active == nil {
		meta.RemoveStatusCondition(conditions, v1alpha1.ConditionActive)
		return
	}
	status := metav1.ConditionFalse
	if active.Reason == v1alpha1.ReasonPodsReady {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type: v1alpha1.ConditionActive, Status: status, Reason: active.Reason, Message: truncate(active.Message, maxMessage),
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	})
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

// tenantStatuses returns each tenant's keys, usage and record at now.
func tenantStatuses(tenants []TenantResult, u *usage.Totals, now time.Time) []v1alpha1.TenantStatus {
	out := make([]v1alpha1.TenantStatus, len(tenants))
	for i, t := range tenants {
		out[i] = v1alpha1.TenantStatus{Name: t.Name, Keys: t.Keys, Record: tenantRecord(u.Record, t.Name, now)}
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

// limitsEvent returns the event a change of the LimitsBelowSpec condition
// deserves: Warning when the provider starts reporting lower limits or
// reports other ones, Normal when it reports them no longer. ok is false when
// nothing changed that a person should hear about.
func limitsEvent(before, after []metav1.Condition) (eventType, reason, note string, ok bool) {
	was := meta.FindStatusCondition(before, v1alpha1.ConditionLimitsBelowSpec)
	now := meta.FindStatusCondition(after, v1alpha1.ConditionLimitsBelowSpec)
	switch {
	case now == nil, was != nil && was.Status == now.Status && was.Message == now.Message:
		return "", "", "", false
	case now.Status == metav1.ConditionTrue:
		return "Warning", now.Reason, now.Message, true
	case was != nil && was.Status == metav1.ConditionTrue:
		return "Normal", now.Reason, "The provider no longer reports limits lower than spec.limits; the gateways pace to the spec's.", true
	}
	return "", "", "", false
}

// activeEvent returns the event a change of the Active condition deserves:
// Normal both ways, since a self-hosted provider waits for its Pods by design
// (before the first is ready, or scaled to zero). ok is false when nothing
// changed.
func activeEvent(before, after []metav1.Condition) (eventType, reason, note string, ok bool) {
	was := meta.FindStatusCondition(before, v1alpha1.ConditionActive)
	now := meta.FindStatusCondition(after, v1alpha1.ConditionActive)
	if now == nil || (was != nil && was.Status == now.Status) {
		return "", "", "", false
	}
	return "Normal", now.Reason, now.Message, true
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
	if now.Status == metav1.ConditionTrue || now.Reason == v1alpha1.ReasonGatewaysBehind {
		eventType = "Normal" // gateways loading a new configuration is no fault
	}
	return eventType, now.Reason, now.Message, true
}
