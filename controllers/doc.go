// Package controllers holds Sluice's reconcilers: every ProviderQuota and
// TenantPlan of a namespace, with the tenants' and providers' key Secrets,
// compile into one gateway configuration (api/gateway/v1) that the gateways
// mount from a Secret and its tenant Secrets, each well under the 1 MiB a
// Secret holds, and the gateways' usage comes back into the objects' status.
//
// The package follows cluster-api's split: Compile and the *_status.go files
// are pure functions, table-tested without Kubernetes; the *_controller.go
// files do the I/O. The gateways' usage is polled and summed in package
// usage, below this one, which the metrics adapter shares without linking
// the reconciler.
//
// Secrets' contents never leave the configuration's Secrets: no status,
// event, log line or error message quotes a key.
package controllers
