package main

import (
	"fmt"
	"strings"
)

// rampTenant is the tenant the lab's ramp sends as.
const rampTenant = "ramp"

// rampPlan is the ramp's TenantPlan, like the gateway the ramp starts for its queue case (each
// user 2 requests a second in bursts of 5, queued; the door at 60 s), and a key Secret for each
// of users users, with the keys the ramp sends: sk-ramp-user-000-0123456789abcdef0123, sk-ramp-user-001-0123456789abcdef0123, ...
func rampPlan(users int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: sluice.dev/v1alpha1
kind: TenantPlan
metadata:
  name: lab-ramp
spec:
  tenants: [%s]
  providers: [%s]
  priority: Interactive
  perUser:
    - {dimension: requests, amount: 2, per: second, burst: 5, onLimit: Queue}
  maxWait: 60s
`, rampTenant, hostedQuota)
	for u := range users {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Secret
metadata:
  name: ramp-user-%03[1]d
  labels: {sluice.dev/tenant: %[2]s, sluice.dev/user: user-%03[1]d}
stringData:
  apiKey: sk-ramp-user-%03[1]d-0123456789abcdef0123
`, u, rampTenant)
	}
	return b.String()
}

// baseConfig is what the manager carries into every configuration it compiles: the Redis that
// the gateways' replicas share.
func baseConfig(redisAddr string, replicas int) string {
	return fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store:
  type: redis
  redis:
    address: %s
    failMode: closed
    replicas: %d
`, redisAddr, replicas)
}
