package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// objectsByReason counts a namespace's ProviderQuotas and TenantPlans by the reason of their Ready
// condition, as the latest compile of that namespace left them: an alert on reason ConfigTooLarge
// says that the gateways keep an older configuration.
var objectsByReason = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "sluice_manager_objects",
	Help: "ProviderQuotas and TenantPlans by namespace, kind and the reason of their Ready condition, after the latest compile.",
}, []string{"namespace", "kind", "reason"})

func init() { metrics.Registry.MustRegister(objectsByReason) }

// countReasons records the namespace's objects by the reason of their Ready condition in out,
// forgetting what an earlier compile of the namespace recorded.
func countReasons(namespace string, out *Output) {
	objectsByReason.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
	for _, r := range out.ProviderQuotas {
		objectsByReason.WithLabelValues(namespace, "ProviderQuota", r.Reason).Inc()
	}
	for _, r := range out.TenantPlans {
		objectsByReason.WithLabelValues(namespace, "TenantPlan", r.Reason).Inc()
	}
}
