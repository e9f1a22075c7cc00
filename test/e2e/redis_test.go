package e2e

import (
	"net/http"
	"os"
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
	config := writeConfig(t, t.TempDir(), up.URL)
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	withRedis := strings.Replace(string(data), "server:\n", "store:\n  type: redis\n  redis: {address: \""+redis.Addr+"\", failMode: closed, replicas: 2}\nserver:\n", 1)
	writeAtomically(t, config, withRedis)
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
