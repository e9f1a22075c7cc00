package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The limited Anthropic account: requests, input tokens and output tokens a minute in the
// proportions of the crowd's calls, each of a prompt of crowdInput tokens and a cap of
// crowdOutput that every answer fills, so that all three limits bind at once.
const (
	crowdRequestsPerMinute = 120
	crowdInput             = 500
	crowdOutput            = 100
	crowdClients           = 12
	// The crowd runs crowdRun; the account's minute is sampled from crowdSampleFrom, once its
	// first minute has passed, to the end.
	crowdRun        = 100 * time.Second
	crowdSampleFrom = 65 * time.Second
)

// crowdStats is what the lab's Anthropic account says of its calls, refusals, calls whose client
// left, and bill.
type crowdStats struct {
	Accepted                int64 `json:"accepted"`
	PromptTokens            int64 `json:"promptTokens"`
	CompletionTokens        int64 `json:"completionTokens"`
	Rejected429Requests     int64 `json:"rejected429Requests"`
	Rejected429Tokens       int64 `json:"rejected429Tokens"`
	Rejected429InputTokens  int64 `json:"rejected429InputTokens"`
	Rejected429OutputTokens int64 `json:"rejected429OutputTokens"`
	Rejected429CountTokens  int64 `json:"rejected429CountTokens"`
	Rejected529             int64 `json:"rejected503"`
	Canceled                int64 `json:"canceled"`
	MicroDollars            int64 `json:"microDollars"`
}

// TestACrowdOfAnthropicSDKsKeepsTheAccountFullWithoutRefusals runs a crowd of Anthropic's Go
// SDK, streaming and not, two tenants' users through two gateways on one Redis, to an Anthropic
// account limited on requests, input tokens and output tokens a minute, each user counting its
// prompt's tokens before each call, as coding agents do: the account refuses none of their calls
// or counts, each of its three minutes stays at 95% of its limit or more once the crowd has
// filled it (the counts, which Anthropic limits apart, take none of its requests), and the
// tenants are charged together what the account billed.
func TestACrowdOfAnthropicSDKsKeepsTheAccountFullWithoutRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab's Anthropic account and Redis for about two minutes; skipped with -short")
	}
	redis := redisserver.Start(t)
	url := startLimitedAnthropicAccount(t)
	cfg := crowdConfig(t, url, redis.Addr)
	gateways := [2]*gateway{startGatewayOn(t, cfg, freeAddr(t), freeAddr(t)), startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))}

	run, stop := context.WithTimeout(t.Context(), crowdRun)
	defer stop()
	var crowd sync.WaitGroup
	var calls, refusedByGateway atomic.Int64
	for i := range crowdClients {
		c := crowdClient(gateways[i%2], []string{keyAlice, keyBob}[i/2%2], &refusedByGateway)
		crowd.Go(func() { callClaudeUntil(t, run, c, i%3 == 0, &calls) })
	}
	used := sampleAccountMinute(t, run, url)
	crowd.Wait()

	s := readCrowdStats(t, url)
	if refused := s.refused(); refused != 0 {
		t.Errorf("the account refused %d calls (%+v); want none", refused, s)
	}
	for _, l := range anthropicLimits {
		if mean := meanOf(used[l.name]); mean < 0.95 {
			t.Errorf("the account's minute of %s held %.1f%% of its limit on average (samples %v); want 95%% or more", l.name, 100*mean, used[l.name])
		}
	}
	checkChargedAsBilled(t, url, gateways)
	t.Logf("%d calls, %d input and %d output tokens; the account's minute held %.1f%% of its requests, %.1f%% of its input and %.1f%% of its output tokens "+
		"on average over %d samples after its first minute (at least %.1f%%, %.1f%% and %.1f%%); the gateways answered %d 429s that the SDKs followed; the account refused %d",
		s.Accepted, s.PromptTokens, s.CompletionTokens, 100*meanOf(used["requests"]), 100*meanOf(used["input-tokens"]), 100*meanOf(used["output-tokens"]),
		len(used["requests"]), 100*minOf(used["requests"]), 100*minOf(used["input-tokens"]), 100*minOf(used["output-tokens"]),
		refusedByGateway.Load(), s.refused())
}

// refused counts the calls and counts the account refused.
func (s crowdStats) refused() int64 {
	return s.Rejected429Requests + s.Rejected429Tokens + s.Rejected429InputTokens + s.Rejected429OutputTokens + s.Rejected429CountTokens + s.Rejected529
}

// startLimitedAnthropicAccount runs the lab's provider as an Anthropic account limited in the
// crowd's proportions, and returns its URL. Its answers fill their caps.
func startLimitedAnthropicAccount(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	proc.Start(t, "lab-anthropic", exec.Command(labBin, "provider", "-listen", addr, "-api", "anthropic", "-api-key", claudeAPIKey,
		"-latency", "1s", "-latency-stddev", "0", "-answer-tokens", "0",
		"-input-price", "3", "-cached-input-price", "0.30", "-cache-write-input-price", "3.75", "-output-price", "15",
		"-max-in-flight", "1000", "-tokens-per-minute", "1000000000",
		"-requests-per-minute", fmt.Sprint(crowdRequestsPerMinute),
		"-input-tokens-per-minute", fmt.Sprint(crowdRequestsPerMinute*crowdInput),
		"-output-tokens-per-minute", fmt.Sprint(crowdRequestsPerMinute*crowdOutput),
		"-count-tokens-requests-per-minute", fmt.Sprint(4*crowdRequestsPerMinute)))
	url := "http://" + addr
	poll.Until(t, processWait, "the lab's Anthropic account to listen", func() bool {
		resp, err := http.Get(url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return url
}

// crowdConfig writes the configuration of gateways on the Redis at redisAddr in front of the
// limited account at url, its limits as its ProviderQuota would give them, for acme (keyAlice)
// and globex (keyBob), each with a month's budget that shows what it was charged.
func crowdConfig(t *testing.T, url, redisAddr string) string {
	t.Helper()
	keyFile := writeClaudeKey(t)
	return writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store: {type: redis, redis: {address: %q, failMode: closed, replicas: 2}}
providers:
  - name: claude
    api: anthropic
    baseURL: %s/v1
    apiKeyFile: %s
    models: [{name: %s}]
    requestsPerMinute: %d
    limits:
      - {dimension: inputTokens, amount: %d, per: minute}
      - {dimension: outputTokens, amount: %d, per: minute}
    prices: {inputPerMillion: "3.00", cachedInputPerMillion: "0.30", cacheWritePerMillion: "3.75", outputPerMillion: "15.00"}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [claude]
    maxWait: 2m
    budget: {amount: "100.00", period: month}
  - name: globex
    keys: [{sha256: %s, user: bob}]
    providers: [claude]
    maxWait: 2m
    budget: {amount: "100.00", period: month}
`, redisAddr, url, keyFile, claudeModel, crowdRequestsPerMinute, crowdRequestsPerMinute*crowdInput, crowdRequestsPerMinute*crowdOutput,
		gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyBob)))
}

// crowdClient is Anthropic's Go SDK calling g as key, retrying what the gateway refuses as it
// retries any 429, and counting those refusals.
func crowdClient(g *gateway, key string, refused *atomic.Int64) anthropic.Client {
	return claudeClient(g, key, option.WithMaxRetries(20), option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			refused.Add(1)
		}
		return resp, err
	}))
}

// crowdParams is a call of the crowd: a prompt of crowdInput tokens as the account counts them
// (four bytes a token) and a cap of crowdOutput.
var crowdParams = anthropic.MessageNewParams{Model: claudeModel, MaxTokens: crowdOutput,
	Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("page", crowdInput)))}}

// crowdCount counts the tokens of crowdParams' prompt.
var crowdCount = anthropic.MessageCountTokensParams{Model: claudeModel, Messages: crowdParams.Messages}

// callClaudeUntil counts the prompt's tokens and then calls c, streaming or not, one call after
// another until run ends, and lets the last call end; each call must get a whole answer.
func callClaudeUntil(t *testing.T, run context.Context, c anthropic.Client, stream bool, calls *atomic.Int64) {
	for run.Err() == nil {
		if count, err := c.Messages.CountTokens(t.Context(), crowdCount); err != nil || count.InputTokens <= 0 {
			t.Errorf("a count of the crowd ended %v with %+v; want a count", err, count)
			return
		}
		var m anthropic.Message
		var err error
		if stream {
			s := c.Messages.NewStreaming(t.Context(), crowdParams)
			for s.Next() {
				err = cmp.Or(err, m.Accumulate(s.Current()))
			}
			err = cmp.Or(err, s.Err())
			s.Close()
		} else {
			var got *anthropic.Message
			if got, err = c.Messages.New(t.Context(), crowdParams); got != nil {
				m = *got
			}
		}
		if err != nil || m.Usage.OutputTokens != crowdOutput {
			t.Errorf("a call of the crowd (stream %v) ended %v with %d output tokens; want %d", stream, err, m.Usage.OutputTokens, crowdOutput)
			return
		}
		calls.Add(1)
	}
}

// anthropicLimits are the account's three limits, by the name of their headers.
var anthropicLimits = []struct{ name string }{{"requests"}, {"input-tokens"}, {"output-tokens"}}

// sampleAccountMinute samples, every two seconds from crowdSampleFrom until run ends, the share
// of each of its limits that the account at url holds, by limit.
func sampleAccountMinute(t *testing.T, run context.Context, url string) map[string][]float64 {
	t.Helper()
	used := map[string][]float64{}
	start := time.Now()
	for run.Err() == nil {
		if time.Since(start) >= crowdSampleFrom {
			h := accountHeaders(t, url)
			for _, l := range anthropicLimits {
				used[l.name] = append(used[l.name], shareUsed(t, h, "Anthropic-Ratelimit-"+l.name))
			}
		}
		select {
		case <-run.Done():
		case <-time.After(2 * time.Second):
		}
	}
	return used
}

// accountHeaders are the rate-limit headers the account at url answers with now.
func accountHeaders(t *testing.T, url string) http.Header {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header
}

// shareUsed is the share of a limit that the headers named prefix-limit and prefix-remaining say
// is used.
func shareUsed(t *testing.T, h http.Header, prefix string) float64 {
	t.Helper()
	limit, _ := strconv.ParseFloat(h.Get(prefix+"-Limit"), 64)
	remaining, _ := strconv.ParseFloat(h.Get(prefix+"-Remaining"), 64)
	if limit == 0 {
		t.Fatalf("the account reports no %s: %v", prefix, h)
	}
	return (limit - remaining) / limit
}

// meanOf is the mean of samples, 0 for none.
func meanOf(samples []float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	var sum float64
	for _, s := range samples {
		sum += s
	}
	return sum / float64(len(samples))
}

// minOf is the least of samples, 0 for none.
func minOf(samples []float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	return slices.Min(samples)
}

// readCrowdStats reads what the account at url says of its calls.
func readCrowdStats(t *testing.T, url string) crowdStats {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s crowdStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
