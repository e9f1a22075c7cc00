package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/redisserver"
)

// TestTwoGatewaysShareTheProviderByWeight runs two gateways on one Redis in front of a provider
// that takes four calls at once, and two tenants, heavy (weight 2) and light (weight 1), with two
// users each, all sending more than the provider takes. The calls reach the gateways unevenly, as
// kept-alive connections behind a Service do: gateway a gets both of heavy's users and one of
// light's, gateway b light's other user only. While both tenants wait, the provider must serve
// heavy twice what it serves light, within 10%, and a tenant's two users alike (Jain's index of at
// least 0.95), whichever gateway each reached. The figures are counts of calls, all of one size.
func TestTwoGatewaysShareTheProviderByWeight(t *testing.T) {
	sim := newSimulated(t, 6000, 100)
	redis := redisserver.Start(t)
	config := weightedConfig(t, sim, redis.Addr)
	a, b := startGateway(t, config), startGateway(t, config)
	const perUser = 200
	senders := []struct {
		g            *gateway
		tenant, user string
	}{{a, "heavy", "h0"}, {a, "heavy", "h1"}, {a, "light", "l0"}, {b, "light", "l1"}}
	var wg sync.WaitGroup
	for _, s := range senders {
		for range perUser {
			wg.Go(func() {
				body := fmt.Sprintf(`{"model":"gpt-4o-mini","user":"%s/%s","max_tokens":50,"messages":[{"role":"user","content":"A page."}]}`, s.tenant, s.user)
				if got := s.g.post(t, "/v1/chat/completions", "sk-"+s.tenant+"-"+s.user, body); got.status != http.StatusOK {
					t.Errorf("%s/%s: %d %s", s.tenant, s.user, got.status, got.body)
				}
			})
		}
	}
	wg.Wait()
	served := whileBothWait(sim.arrivals(), "heavy/", 2*perUser*9/10)
	ratio := float64(served["heavy/h0"]+served["heavy/h1"]) / float64(served["light/l0"]+served["light/l1"])
	light, heavy := jain(served["light/l0"], served["light/l1"]), jain(served["heavy/h0"], served["heavy/h1"])
	t.Logf("while both tenants waited the provider served %v: heavy to light %.2f : 1; Jain's index over light's users %.3f, heavy's %.3f",
		served, ratio, light, heavy)
	if ratio < 1.8 || ratio > 2.2 {
		t.Errorf("heavy was served %.2f times what light was; want 1.8 to 2.2, by their weights 2 and 1", ratio)
	}
	if light < 0.95 || heavy < 0.95 {
		t.Errorf("Jain's index over a tenant's users: light %.3f, heavy %.3f; want at least 0.95", light, heavy)
	}
	if st := sim.Stats(t); st.Rejected429Requests+st.Rejected429Tokens+st.Rejected503 != 0 {
		t.Errorf("the provider refused calls: %+v", st)
	}
}

// whileBothWait counts the arrivals by caller until the prefix's callers have had n of them: a
// window in which every caller still waited.
func whileBothWait(arrivals []string, prefix string, n int) map[string]int {
	counts, seen := map[string]int{}, 0
	for _, caller := range arrivals {
		if seen == n {
			break
		}
		counts[caller]++
		if strings.HasPrefix(caller, prefix) {
			seen++
		}
	}
	return counts
}

// jain is Jain's fairness index of two counts: 1 when equal.
func jain(x, y int) float64 {
	sum, squares := float64(x+y), float64(x*x+y*y)
	if squares == 0 {
		return 1
	}
	return sum * sum / (2 * squares)
}

// weightedConfig writes a configuration of two gateways sharing the Redis at addr, in front of
// sim, which they let take four calls at once: tenants heavy (weight 2) and light (weight 1),
// each with users whose keys are sk-<tenant>-<user>.
func weightedConfig(t *testing.T, sim *simulated, addr string) string {
	key := func(tenant, user string) string {
		return fmt.Sprintf("{sha256: %s, user: %s}", gatewayv1.HashKey("sk-"+tenant+"-"+user), user)
	}
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store:
  type: redis
  redis: {address: %q, replicas: 2}
providers:
  - name: sim
    baseURL: %s/v1
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
    requestsPerMinute: 6000
    tokensPerMinute: 10000000
    maxInFlight: 4
    prices: {inputPerMillion: "3", outputPerMillion: "3"}
tenants:
  - {name: heavy, weight: 2, keys: [%s, %s], providers: [sim], maxWait: 5m}
  - {name: light, weight: 1, keys: [%s, %s], providers: [sim], maxWait: 5m}
`, addr, sim.url, key("heavy", "h0"), key("heavy", "h1"), key("light", "l0"), key("light", "l1"))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
