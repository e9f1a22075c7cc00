package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// TestALargeCallHoldsBackNoCallTheProvidersMinuteHasRoomFor runs two gateways sharing their
// limits in Redis before the lab's provider of 300,000 tokens a minute. A call of 150,000 tokens
// through one gateway leaves the pace that spreads the provider's minute 31 s in debt; another
// tenant's calls through the other gateway, which wait 8 s at most, are sent at once or at the
// pace rather than behind the debt, since the minute has room for them, and the provider answers
// every call without a 429.
func TestALargeCallHoldsBackNoCallTheProvidersMinuteHasRoomFor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the lab, Redis and the gateway binaries; skipped with -short")
	}
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr,
		"-requests-per-minute", "600", "-tokens-per-minute", "300000", "-latency", "100ms", "-latency-stddev", "0"))
	sim := &simulated{direct: "http://" + addr}
	poll.Until(t, processWait, "the lab provider", func() bool {
		resp, err := http.Get(sim.direct + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	config := paceConfig(t, sim.direct, redisserver.Start(t).Addr)
	one, other := startGateway(t, config), startGateway(t, config)
	if a := one.post(t, "/v1/chat/completions", "sk-acme", page("acme", 150_000)); a.status != http.StatusOK {
		t.Fatalf("a call of 150,000 tokens: %d %s; want it sent", a.status, a.body)
	}
	start := time.Now()
	for i := range 5 {
		a := other.post(t, "/v1/chat/completions", "sk-globex", page("globex", 200))
		if a.status != http.StatusOK {
			t.Fatalf("call %d of globex, %v after the large call: %d %s; want it sent, the minute having room for it", i, time.Since(start), a.status, a.body)
		}
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("five small calls took %v after the large call; want them sent at the pace, not behind its 31 s of debt", took)
	}
	if st := sim.Stats(t); st.Rejected429Requests+st.Rejected429Tokens+st.Rejected503 != 0 || st.Accepted != 6 {
		t.Errorf("the provider saw %+v; want 6 accepted and no 429 or 503", st)
	}
}

// paceConfig writes a configuration of a provider of 300,000 tokens a minute at url, whose limits
// two gateways share in the Redis at redisAddr, and two tenants that queue: acme for a minute,
// globex for 8 s.
func paceConfig(t *testing.T, url, redisAddr string) string {
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store:
  type: redis
  redis: {address: %q, failMode: closed, replicas: 2}
providers:
  - name: sim
    baseURL: %s/v1
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
    requestsPerMinute: 600
    tokensPerMinute: 300000
    prices: {inputPerMillion: "3", outputPerMillion: "3"}
tenants:
  - {name: acme, keys: [{sha256: %s, user: u}], providers: [sim], maxWait: 60s}
  - {name: globex, keys: [{sha256: %s, user: u}], providers: [sim], maxWait: 8s}
`, redisAddr, url, gatewayv1.HashKey("sk-acme"), gatewayv1.HashKey("sk-globex"))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
