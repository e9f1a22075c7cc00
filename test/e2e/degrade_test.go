package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// TestGatewayDegradesWhenTheBudgetRunsLow gives a tenant a budget of $0.002 and a fallback below
// 99% of it: the first call spends $0.000066 (the stub's 7 and 3 tokens at $3 and $15 a million),
// so the second goes to the cheaper model and says so.
func TestGatewayDegradesWhenTheBudgetRunsLow(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	config := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: stub
    baseURL: %s/v1
    models: [{name: gpt-4o-mini, defaultMaxTokens: 50}, {name: gpt-4o-nano, defaultMaxTokens: 50}]
    prices: {inputPerMillion: "3.00", outputPerMillion: "15.00"}
tenants:
  - name: thrifty
    keys: [{sha256: %s, user: u}]
    providers: [stub]
    budget: {amount: "0.002", period: month}
    degrade: {model: gpt-4o-mini, fallback: gpt-4o-nano, belowPercent: 99}
`, up.URL, gatewayv1.HashKey("sk-thrifty"))
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, path)

	first := g.post(t, "/v1/chat/completions", "sk-thrifty", chatBody)
	if first.status != http.StatusOK || first.header.Get("X-Sluice-Degraded-Model") != "" {
		t.Fatalf("first call: %d, degraded to %q; want 200 on the model asked for", first.status, first.header.Get("X-Sluice-Degraded-Model"))
	}
	second := g.post(t, "/v1/chat/completions", "sk-thrifty", chatBody)
	if second.status != http.StatusOK || second.header.Get("X-Sluice-Degraded-Model") != "gpt-4o-nano" {
		t.Fatalf("second call: %d, x-sluice-degraded-model %q; want 200 on gpt-4o-nano", second.status, second.header.Get("X-Sluice-Degraded-Model"))
	}
	if _, sent := up.last(); sent["model"] != "gpt-4o-nano" {
		t.Errorf("the provider received model %v; want the fallback", sent["model"])
	}
}
