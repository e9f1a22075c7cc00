package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/redisserver"
)

// TestOperatorTwoProviderPlanSpendsOneBudget runs the manager with a base configuration on Redis,
// a plan whose tenant may use two providers, and a gateway on the configuration the manager
// wrote. Nine calls, five to one provider and four to the other, count against one daily quota
// of the user and spend one budget: kubectl describe shows the plan's one budget spent by both,
// and each provider's own spend.
func TestOperatorTwoProviderPlanSpendsOneBudget(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/crd")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "create", "namespace", "sluice")
	up := newUpstream(t)
	redis := redisserver.Start(t)
	dir := t.TempDir()
	objects, base := filepath.Join(dir, "two-providers.yaml"), filepath.Join(dir, "base-config.yaml")
	writeAtomically(t, objects, twoProviderPlan(up.URL))
	writeAtomically(t, base, "apiVersion: gateway.sluice.dev/v1\nkind: GatewayConfig\nstore:\n  type: redis\n  redis: {address: \""+redis.Addr+"\", failMode: closed}\n")
	c.Kubectl(t, "apply", "-n", "sluice", "-f", objects)

	api, admin := freeAddr(t), freeAddr(t)
	startManager(t, c, "http://"+admin+"/admin/usage", "--base-config", base)
	configDir := t.TempDir()
	writeConfigSecret(t, c, configDir, up.URL)
	g := startGatewayOn(t, filepath.Join(configDir, "config.yaml"), api, admin)
	for i := range 9 {
		model := []string{"gpt-4o-mini", "claude-haiku"}[i%2]
		body := strings.Replace(chatBody, "gpt-4o-mini", model, 1)
		if a := g.post(t, "/v1/chat/completions", "sk-hooli-dana-0123456789abcdef0123456789", body); a.status != http.StatusOK {
			t.Fatalf("call %d, to %s: %d %s", i+1, model, a.status, a.body)
		}
	}

	// The user's daily quota is one window, "<end> <used>", that both providers' calls count in.
	window, err := redis.Client(t).Get(context.Background(), "{tenant:hooli}:user:dana:requests:day").Result()
	if _, used, _ := strings.Cut(window, " "); err != nil || used != "9" {
		t.Errorf("dana's daily quota holds %q, %v; want 9 used: the calls to both providers, counted once", window, err)
	}
	// Each call is charged 10 tokens at $3 a million: $0.00003.
	describe := waitDescribe(t, c, "tp", "two-providers", `Spent This Period:\s+0\.00027\n`)
	mustContain(t, describe, "the two-provider plan's one budget", `Spent This Period:\s+0\.00027\n`, `Budget Remaining:\s+9\.99973\n`)
	mustContain(t, c.Kubectl(t, "get", "tp", "-n", "sluice"), "kubectl get tp", `two-providers\s+1\s+10\s+0\.00027\s+`)
	for provider, spent := range map[string]string{"openai": `0\.00015`, "anthropic": `0\.00012`} {
		describe := waitDescribe(t, c, "pq", provider, `Spend This Month:\s+`+spent+`\n`)
		mustContain(t, describe, provider+"'s own spend", `Reason:\s+GatewaysReported`)
	}
}

// twoProviderPlan is two hosted providers on the test's upstream, with their keys, and a plan with
// a daily quota per user and a budget of $10 a month, whose tenant hooli may use both and has one
// key, for its user dana.
func twoProviderPlan(upstreamURL string) string {
	var b strings.Builder
	for _, p := range []struct{ name, model string }{{"openai", "gpt-4o-mini"}, {"anthropic", "claude-haiku"}} {
		fmt.Fprintf(&b, `apiVersion: sluice.dev/v1alpha1
kind: ProviderQuota
metadata: {name: %[1]s}
spec:
  baseURL: %[2]s/v1
  models: [{name: %[3]s, encoding: o200k_base}]
  limits: {requestsPerMinute: 1500, tokensPerMinute: 300000, maxInFlight: 200}
  prices: {inputPerMillion: "3.00", outputPerMillion: "3.00"}
  apiKeySecretRef: {name: %[1]s-api-key}
---
apiVersion: v1
kind: Secret
metadata: {name: %[1]s-api-key, labels: {sluice.dev/provider: %[1]s}}
stringData: {apiKey: sk-provider-%[1]s}
---
`, p.name, upstreamURL, p.model)
	}
	b.WriteString(`apiVersion: sluice.dev/v1alpha1
kind: TenantPlan
metadata: {name: two-providers}
spec:
  tenants: [hooli]
  providers: [openai, anthropic]
  perUser:
    - {dimension: requests, amount: 1000, per: day, onLimit: Reject}
  budget: {amount: "10", period: month}
---
apiVersion: v1
kind: Secret
metadata: {name: hooli-dana, labels: {sluice.dev/tenant: hooli, sluice.dev/user: dana}}
stringData: {apiKey: sk-hooli-dana-0123456789abcdef0123456789}
`)
	return b.String()
}
