package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The agent's transcript: a document of about 20,000 tokens that every turn resends, then the
// turns so far. The lab provider counts four bytes a token.
const (
	agentDocumentBytes = 80_000
	agentTurns         = 8
)

// billedStats is what the lab provider's /stats says it billed, by class.
type billedStats struct {
	MicroDollars       int64 `json:"microDollars"`
	PromptTokens       int64 `json:"promptTokens"`
	CachedPromptTokens int64 `json:"cachedPromptTokens"`
	CompletionTokens   int64 `json:"completionTokens"`
}

// TestAnAgentsCachedTranscriptIsChargedAsBilled runs an agent that resends a growing transcript,
// mostly cached at its provider, through two gateways on one Redis, turn about: the tenant's
// budget and the provider's spend hold within 1% of what the provider billed, cached input at a
// tenth of the input price.
func TestAnAgentsCachedTranscriptIsChargedAsBilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider and Redis; skipped with -short")
	}
	redis := redisserver.Start(t)
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-latency", "20ms", "-latency-stddev", "0",
		"-input-price", "2.50", "-cached-input-price", "0.25", "-output-price", "10",
		"-max-in-flight", "1000", "-requests-per-minute", "1000000", "-tokens-per-minute", "1000000000"))
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
    models: [{name: gpt-4o, defaultMaxTokens: 100}]
    prices: {inputPerMillion: "2.50", cachedInputPerMillion: "0.25", outputPerMillion: "10.00"}
    spendPerMonth: "1000.00"
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [lab]
    budget: {amount: "100.00", period: month}
`, redis.Addr, url, gatewayv1.HashKey(keyAlice)))
	gateways := []*gateway{startGatewayOn(t, cfg, freeAddr(t), freeAddr(t)), startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))}

	messages := []map[string]string{{"role": "user", "content": agentDocument()}}
	for turn := range agentTurns {
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "max_tokens": 50, "messages": messages})
		a := gateways[turn%2].post(t, "/v1/chat/completions", keyAlice, string(body))
		if a.status != http.StatusOK {
			t.Fatalf("turn %d: %d %s", turn, a.status, a.body)
		}
		messages = append(messages, map[string]string{"role": "assistant", "content": "Noted."},
			map[string]string{"role": "user", "content": fmt.Sprintf("Turn %d: what changes on page %d?", turn+1, turn+1)})
	}

	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var billed billedStats
	json.NewDecoder(resp.Body).Decode(&billed)
	resp.Body.Close()
	if billed.CachedPromptTokens < billed.PromptTokens/2 {
		t.Fatalf("the provider read %d of %d prompt tokens from its cache; the test needs most of them cached", billed.CachedPromptTokens, billed.PromptTokens)
	}
	budget := spent(t, gateways[0])
	var provider int64
	for _, g := range gateways {
		for _, p := range g.usage(t).Providers {
			micros, _ := p.SpendThisMonth.MicroDollars()
			provider += micros
		}
	}
	for level, charged := range map[string]int64{"the tenant's budget": budget, "the provider's spend": provider} {
		if off := math.Abs(float64(charged-billed.MicroDollars)) / float64(billed.MicroDollars); off > 0.01 {
			t.Errorf("%s holds %d micro-dollars; the provider billed %d (%.2f%% apart; want at most 1%%)", level, charged, billed.MicroDollars, 100*off)
		}
	}
	atFullPrice := (billed.PromptTokens*2_500_000 + billed.CompletionTokens*10_000_000 + 999_999) / 1_000_000
	t.Logf("%d turns, %d prompt tokens of which %d cached: billed $%.6f, charged $%.6f (budget) and $%.6f (provider); at the full input price $%.6f",
		agentTurns, billed.PromptTokens, billed.CachedPromptTokens, float64(billed.MicroDollars)/1e6, float64(budget)/1e6, float64(provider)/1e6, float64(atFullPrice)/1e6)
}

// agentDocument is about agentDocumentBytes of text that varies, so that no shorter prefix of it
// repeats another's.
func agentDocument() string {
	var b strings.Builder
	for page := 0; b.Len() < agentDocumentBytes; page++ {
		fmt.Fprintf(&b, "Page %d. The ledger for account %d shows entry %d moved %d units to store %d.\n", page, page*7919%1000, page, page*31%97, page%13)
	}
	return b.String()[:agentDocumentBytes]
}
