package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The output-limited account: a provider that limits output tokens a minute apart, as Anthropic
// does, charging each call its cap as it starts. Every answer fills its cap.
const (
	outputPerMinute = 6000
	outputCap       = 200
	outputCrowd     = 10
	// The crowd runs outputRun; the provider's minute is sampled from outputSampleFrom, once its
	// first minute has passed, to the end.
	outputRun        = 100 * time.Second
	outputSampleFrom = 65 * time.Second
)

// outputStats is what the lab provider's /stats says of its refusals and output.
type outputStats struct {
	Accepted                int64 `json:"accepted"`
	CompletionTokens        int64 `json:"completionTokens"`
	Rejected429Requests     int64 `json:"rejected429Requests"`
	Rejected429Tokens       int64 `json:"rejected429Tokens"`
	Rejected429OutputTokens int64 `json:"rejected429OutputTokens"`
	Rejected429InputTokens  int64 `json:"rejected429InputTokens"`
}

// TestAnOutputLimitedAccountIsKeptFullWithoutRefusals runs a crowd of output-heavy calls, whose
// clients come back when told, through two gateways on one Redis, to an account limited on
// output tokens a minute: the provider refuses none, and its minute of output stays at 95% of its
// limit or more once the crowd has filled it.
func TestAnOutputLimitedAccountIsKeptFullWithoutRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider and Redis for about two minutes; skipped with -short")
	}
	redis := redisserver.Start(t)
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-latency", "200ms", "-latency-stddev", "0",
		"-output-tokens-per-minute", strconv.Itoa(outputPerMinute), "-max-in-flight", "1000",
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
    models: [{name: gpt-4o-mini, defaultMaxTokens: %d}]
    limits: [{dimension: outputTokens, amount: %d, per: minute}]
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [lab]
    maxWait: 2m
`, redis.Addr, url, outputCap, outputPerMinute, gatewayv1.HashKey(keyAlice)))
	gateways := []*gateway{startGatewayOn(t, cfg, freeAddr(t), freeAddr(t)), startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))}

	ctx, cancel := context.WithTimeout(context.Background(), outputRun)
	defer cancel()
	var crowd sync.WaitGroup
	for user := range outputCrowd {
		crowd.Add(1)
		go func() {
			defer crowd.Done()
			callUntilDone(ctx, gateways[user%2].api)
		}()
	}
	var used []float64
	start := time.Now()
	for ctx.Err() == nil {
		if time.Since(start) >= outputSampleFrom {
			used = append(used, outputMinuteUsed(t, url))
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	crowd.Wait()

	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var s outputStats
	json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	if refused := s.Rejected429Requests + s.Rejected429Tokens + s.Rejected429OutputTokens + s.Rejected429InputTokens; refused != 0 {
		t.Errorf("the provider refused %d calls with 429 (%+v); want none", refused, s)
	}
	var sum float64
	for _, u := range used {
		sum += u
	}
	mean := sum / float64(len(used))
	if len(used) == 0 || mean < 0.95 {
		t.Errorf("the provider's minute of output held %.1f%% of its limit on average (samples %v); want 95%% or more", 100*mean, used)
	}
	t.Logf("%d calls, %d output tokens; the provider's minute of output held %.1f%% of its %d on average over %d samples after its first minute; %d refused",
		s.Accepted, s.CompletionTokens, 100*mean, outputPerMinute, len(used), s.Rejected429OutputTokens)
}

// callUntilDone sends output-heavy calls to the gateway at api one after another until ctx ends,
// coming back after the Retry-After of a refusal.
func callUntilDone(ctx context.Context, api string) {
	body := fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":%d,"messages":[{"role":"user","content":"Write a long story."}]}`, outputCap)
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyAlice)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(max(wait, 1)) * time.Second):
			}
		}
	}
}

// outputMinuteUsed is the share of its output tokens a minute that the provider at url holds
// now, as its rate-limit headers say.
func outputMinuteUsed(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	limit, _ := strconv.ParseFloat(resp.Header.Get("Anthropic-Ratelimit-Output-Tokens-Limit"), 64)
	remaining, _ := strconv.ParseFloat(resp.Header.Get("Anthropic-Ratelimit-Output-Tokens-Remaining"), 64)
	if limit == 0 {
		t.Fatalf("the provider reports no output limit: %v", resp.Header)
	}
	return (limit - remaining) / limit
}
