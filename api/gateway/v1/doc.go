// Package v1 is the contract between Sluice's processes: the gateway
// configuration file, which the operator compiles into a Secret (or a person
// writes by hand), and the usage snapshot the gateway serves at
// GET /admin/usage for the operator and the metrics adapter.
//
// Callers import it as gatewayv1:
//
//	import gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
//
// The configuration file is YAML or JSON. Parse and Load decode it strictly
// (an unknown, misspelt or repeated key is an error that names it), apply the
// defaults documented on each field and validate it; every validation error
// names the field path and the value at fault. The file never holds secrets:
// tenants' API keys appear only as SHA-256 hashes (see HashKey), and a
// provider's API key or the Redis password is read by the gateway from a file
// of its own whose path the configuration names.
//
// A configuration too large for one file, such as one Kubernetes Secret, may
// write its plans' terms once (Config.Plans) and put its tenants in tenant
// files of their own (Config.TenantFiles), each a TenantList; Load reads
// them all together, or refuses the lot.
//
// Amounts of money are decimal strings (type Money), never floats. In YAML,
// quote them ("3.00"): YAML reads an unquoted 3.00 as a number.
package v1

// APIVersion is the apiVersion every configuration file must carry.
const APIVersion = "gateway.sluice.dev/v1"

// Kind is the kind every configuration file must carry.
const Kind = "GatewayConfig"

// TenantListKind is the kind every tenant file (see Config.TenantFiles) must
// carry.
const TenantListKind = "TenantList"
