// Package usage polls the gateways' usage snapshots (api/gateway/v1) and sums
// them: the operator writes the sum into the ProviderQuotas' and
// TenantPlans' status, and the metrics adapter serves the queues from it.
// After each poll, the operator's Poller also asks one gateway for its
// record of the calendar windows and keeps the durable record from it (see
// RecordStore).
//
// Sum, MergeRecord and their helpers are pure functions, table-tested
// without a gateway; the Poller and the gateway listers do the I/O. The package depends on the
// API packages and a Kubernetes client only, so that the metrics adapter
// links no reconciler.
package usage
