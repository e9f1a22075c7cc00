// Package usage polls the gateways' usage snapshots (api/gateway/v1) and sums
// them: the operator writes the sum into the ProviderQuotas' and
// TenantPlans' status, and the metrics adapter serves the queues from it.
//
// Sum and its helpers are pure functions, table-tested without a gateway;
// the Poller and the gateway listers do the I/O. The package depends on the
// API packages and a Kubernetes client only, so that the metrics adapter
// links no reconciler.
package usage
