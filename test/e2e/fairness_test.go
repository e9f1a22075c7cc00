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
// users each, all sending more than the provider takes. While both tenants wait, the provider
// must serve heavy twice what it serves light, within 10%, and a tenant's two users alike
// (Jain's index of at least 0.95), whichever gateway each call reached: spread evenly, or
// unevenly, as kept-alive connections behind a Service are (gateway a gets both of heavy's users
// and one of light's, gateway b light's other user only). The figures are counts of calls, all
// of one size (about 2,000 tokens: a lane may run a round of the fair queue, 8,192 tokens, ahead
// of the others).
func TestTwoGatewaysShareTheProviderByWeight(t *testing.T) {
	tests := []struct {
		name string
		// gatewayOf is the gateway, a (0) or b (1), of a user's i-th call.
		gatewayOf func(user string, i int) int
	}{
		{"calls spread evenly", func(_ string, i int) int { return i % 2 }},
		{"users kept on one gateway, light's split", func(user string, _ int) int {
			if user == "l1" {
				return 1
			}
			return 0
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSimulated(t, 6000, 100)
			redis := redisserver.Start(t)
			config := weightedConfig(t, sim, redis.Addr)
			gateways := []*gateway{startGateway(t, config), startGateway(t, config)}
			const perUser = 200
			sendAll(t, perUser, func(tenant, user string, i int) *gateway { return gateways[tc.gatewayOf(user, i)] })
			checkWeightedShares(t, sim, perUser)
		})
	}
}

// sendAll sends perUser calls of each user of heavy and light at once, each to the gateway
// gatewayOf picks, and waits for their answers, which must be 200.
func sendAll(t *testing.T, perUser int, gatewayOf func(tenant, user string, i int) *gateway) {
	var wg sync.WaitGroup
	for _, caller := range []string{"heavy/h0", "heavy/h1", "light/l0", "light/l1"} {
		tenant, user, _ := strings.Cut(caller, "/")
		for i := range perUser {
			g := gatewayOf(tenant, user, i)
			wg.Go(func() {
				body := fmt.Sprintf(`{"model":"gpt-4o-mini","user":%q,"max_tokens":2000,"messages":[{"role":"user","content":"A page."}]}`, caller)
				if got := g.post(t, "/v1/chat/completions", "sk-"+tenant+"-"+user, body); got.status != http.StatusOK {
					t.Errorf("%s: %d %s", caller, got.status, got.body)
				}
			})
		}
	}
	wg.Wait()
}

// checkWeightedShares checks what the provider served while both tenants waited: heavy twice
// light, within 10%, and each tenant's users alike.
func checkWeightedShares(t *testing.T, sim *simulated, perUser int) {
	t.Helper()
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
