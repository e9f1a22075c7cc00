package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"strconv"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// providerDay is the requests a day the account takes, counted from midnight in Los Angeles, as
// Gemini counts them.
const providerDay = 5

// TestAProvidersDayOfRequestsHoldsAcrossGateways sends calls to an account limited on requests a
// day through two gateways on one Redis: the day's last request is the limit's, the next is
// refused by the gateways, never by the provider, and told to come back at midnight in the
// provider's time zone.
func TestAProvidersDayOfRequestsHoldsAcrossGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider and Redis; skipped with -short")
	}
	redis := redisserver.Start(t)
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-latency", "20ms", "-latency-stddev", "0",
		"-requests-per-day", strconv.Itoa(providerDay), "-day-time-zone", "America/Los_Angeles", "-max-in-flight", "1000",
		"-requests-per-minute", "1000000", "-tokens-per-minute", "1000000000"))
	url := "http://" + addr
	poll.Until(t, processWait, "the lab provider to listen", func() bool {
		resp, err := http.Get(url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	cfg := writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store: {type: redis, redis: {address: %q, failMode: closed, replicas: 2}}
providers:
  - name: lab
    baseURL: %s/v1
    models: [{name: gpt-4o-mini, defaultMaxTokens: 20}]
    limits: [{dimension: requests, amount: %d, per: day}]
    timeZone: America/Los_Angeles
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [lab]
    maxWait: 5s
`, redis.Addr, url, providerDay, gatewayv1.HashKey(keyAlice)))
	gateways := []*gateway{startGatewayOn(t, cfg, freeAddr(t), freeAddr(t)), startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))}
	call := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi."}]}`
	for i := range providerDay {
		if a := gateways[i%2].post(t, "/v1/chat/completions", keyAlice, call); a.status != http.StatusOK {
			t.Fatalf("call %d of the day's %d: %d %s", i+1, providerDay, a.status, a.body)
		}
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gateways {
		a := g.post(t, "/v1/chat/completions", keyAlice, call)
		now := time.Now().In(la)
		midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, la)
		if a.status != http.StatusTooManyRequests {
			t.Fatalf("a call past the provider's day: %d %s; want 429", a.status, a.body)
		}
		retryAfter, _ := strconv.ParseFloat(a.header.Get("Retry-After"), 64)
		if want := midnight.Sub(now).Seconds(); math.Abs(retryAfter-want) > 60 {
			t.Errorf("Retry-After: %v s; want about %.0f s, until midnight in Los Angeles", retryAfter, want)
		}
	}
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Accepted                  int64 `json:"accepted"`
		Rejected429RequestsPerDay int64 `json:"rejected429RequestsPerDay"`
	}
	json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	if s.Accepted != providerDay || s.Rejected429RequestsPerDay != 0 {
		t.Errorf("the provider accepted %d calls and refused %d for its day; want %d and none", s.Accepted, s.Rejected429RequestsPerDay, providerDay)
	}
}
