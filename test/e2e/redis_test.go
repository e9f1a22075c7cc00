package e2e

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/redisserver"
)

// TestGatewaysShareRedis runs two gateways on one Redis: a user's daily quota is one quota across
// both, and when Redis goes away a gateway that fails closed refuses with 503 and says it is not
// ready.
func TestGatewaysShareRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	redis := redisserver.Start(t)
	config := writeRedisConfig(t, up.URL, redis.Addr, "closed")
	a, b := startGateway(t, config), startGateway(t, config)

	for i := range 5 {
		g := []*gateway{a, b}[i%2]
		if got := g.post(t, "/v1/chat/completions", keyCarol, chatBody); got.status != http.StatusOK {
			t.Fatalf("call %d of carol's 5 a day, alternating gateways: %d %s", i+1, got.status, got.body)
		}
	}
	for _, g := range []*gateway{a, b} {
		if got := g.post(t, "/v1/chat/completions", keyCarol, chatBody); got.status != http.StatusTooManyRequests {
			t.Errorf("sixth call: %d %s; want 429 from either gateway", got.status, got.body)
		}
	}

	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}
	down := a.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if down.status != http.StatusServiceUnavailable || down.errorCode(t) != "limiter_unavailable" {
		t.Errorf("with Redis gone: %d %s; want 503 limiter_unavailable", down.status, down.body)
	}
	resp, err := http.Get(a.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis gone = %d; want 503", resp.StatusCode)
	}
	if !strings.Contains(a.metrics(t), "sluice_gateway_store_up 0") {
		t.Error("sluice_gateway_store_up does not say the store is down")
	}
}

// TestGatewayFailsOpen checks that a gateway whose Redis goes away, with failMode open, keeps
// serving on its own share of each limit: a quota of 5 a day over 2 replicas leaves it 2.
func TestGatewayFailsOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	redis := redisserver.Start(t)
	config := writeRedisConfig(t, up.URL, redis.Addr, "open")
	g := startGateway(t, config)
	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}

	var statuses []int
	for range 3 {
		statuses = append(statuses, g.post(t, "/v1/chat/completions", keyCarol, chatBody).status)
	}
	if want := []int{200, 200, 429}; !slices.Equal(statuses, want) {
		t.Errorf("carol's calls with Redis gone = %v; want %v (her own share: 5 a day / 2 replicas)", statuses, want)
	}
	resp, err := http.Get(g.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz failing open = %d; want 200: the gateway still serves", resp.StatusCode)
	}
	if m := g.metrics(t); !strings.Contains(m, "sluice_gateway_store_up 0") || !strings.Contains(m, `sluice_gateway_store_errors_total{action="local"} 3`) {
		t.Error("the metrics do not say the store is down and decisions were taken locally")
	}
}

// writeRedisConfig writes the test configuration (writeConfig's) with the limits in the Redis at
// addr, for two replicas, failing as failMode says; it returns its path.
func writeRedisConfig(t *testing.T, upstreamURL, addr, failMode string) string {
	t.Helper()
	config := writeConfig(t, t.TempDir(), upstreamURL)
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	store := "store:\n  type: redis\n  redis: {address: \"" + addr + "\", failMode: " + failMode + ", replicas: 2}\nserver:\n"
	writeAtomically(t, config, strings.Replace(string(data), "server:\n", store, 1))
	return config
}
