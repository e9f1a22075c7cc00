package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The lab's Anthropic account: its key, the model the tests call, and the tokens it answers.
// Its prices are Anthropic's for a Sonnet: $3 a million input tokens, $0.30 read from the cache,
// $3.75 written to it for five minutes, $15 output.
const (
	claudeAPIKey       = "sk-ant-lab-upstream"
	claudeModel        = "claude-sonnet-5-5"
	claudeAnswerTokens = 30
)

// startAnthropicAccount runs the lab's provider as an Anthropic account, a message taking 20 ms
// unless flags say otherwise, and returns its URL.
func startAnthropicAccount(t *testing.T, flags ...string) string {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"provider", "-listen", addr, "-api", "anthropic", "-api-key", claudeAPIKey,
		"-latency", "20ms", "-latency-stddev", "0", "-answer-tokens", fmt.Sprint(claudeAnswerTokens),
		"-input-price", "3", "-cached-input-price", "0.30", "-cache-write-input-price", "3.75", "-output-price", "15",
		"-max-in-flight", "1000", "-requests-per-minute", "1000000",
		"-input-tokens-per-minute", "1000000000", "-output-tokens-per-minute", "1000000000"}, flags...)
	proc.Start(t, "lab-anthropic", exec.Command(labBin, args...))
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

// anthropicConfig writes the configuration of gateways on the Redis at redisAddr in front of the
// Anthropic account at url, at its prices, for acme (keyAlice) and daily (keyDave), each with a
// month's budget that shows what it was charged in Redis, and daily with a day's quota of one
// request.
func anthropicConfig(t *testing.T, url, redisAddr string) string {
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
    models: [{name: %s, defaultMaxTokens: 1024}]
    prices: {inputPerMillion: "3.00", cachedInputPerMillion: "0.30", cacheWritePerMillion: "3.75", outputPerMillion: "15.00"}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [claude]
    budget: {amount: "100.00", period: month}
  - name: daily
    keys: [{sha256: %s, user: dave}]
    providers: [claude]
    budget: {amount: "100.00", period: month}
    perUser:
      - {dimension: requests, amount: 1, per: day, onLimit: Reject}
`, redisAddr, url, keyFile, claudeModel, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyDave)))
}

// writeClaudeKey writes the lab's Anthropic key to a file and returns its path.
func writeClaudeKey(t *testing.T) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "claude-key")
	writeAtomically(t, keyFile, claudeAPIKey)
	return keyFile
}

// startAnthropicGateways runs the lab's Anthropic account, with flags, and two gateways on one
// Redis in front of it, and returns the account's URL and the gateways.
func startAnthropicGateways(t *testing.T, flags ...string) (string, [2]*gateway) {
	t.Helper()
	redis := redisserver.Start(t)
	url := startAnthropicAccount(t, flags...)
	cfg := anthropicConfig(t, url, redis.Addr)
	return url, [2]*gateway{startGatewayOn(t, cfg, freeAddr(t), freeAddr(t)), startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))}
}

// claudeClient is Anthropic's Go SDK, unmodified but for its base URL and key, calling g.
func claudeClient(g *gateway, key string, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(g.api), option.WithAPIKey(key)}, opts...)...)
}

// claudeSays is a call to claudeModel of one user message.
func claudeSays(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: claudeModel, MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

// TestAnthropicGoSDKThroughTwoGatewaysIsChargedAsBilled runs Anthropic's Go SDK through two
// gateways on one Redis to the lab's Anthropic account, turn about: a message, a stream that
// thinks, a count of tokens, a tool called and its result answered, and a prompt cached by one
// gateway and read through the other, and a job. The tenants are charged exactly what the
// account billed, cache reads and writes at their prices; an unknown model and a spent quota are Anthropic's
// errors, the quota's raised at once.
func TestAnthropicGoSDKThroughTwoGatewaysIsChargedAsBilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider and Redis; skipped with -short")
	}
	url, gateways := startAnthropicGateways(t)
	clients := [2]anthropic.Client{claudeClient(gateways[0], keyAlice), claudeClient(gateways[1], keyAlice)}
	ctx := t.Context()

	msg, err := clients[0].Messages.New(ctx, claudeSays("Say hello."))
	if err != nil || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens != claudeAnswerTokens || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("New() = %+v, %v; want %d tokens of text", msg, err, claudeAnswerTokens)
	}

	thinking := claudeSays("Think, then say hello.")
	thinking.MaxTokens, thinking.Thinking = 2000, anthropic.ThinkingConfigParamOfEnabled(1024)
	streamed := accumulateClaude(t, clients[1], thinking)
	if streamed.Content[0].Type != "thinking" || streamed.Usage.OutputTokens <= claudeAnswerTokens || streamed.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("NewStreaming(thinking) accumulates %+v; want thinking, then text", streamed)
	}

	count, err := clients[0].Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: claudeModel, Messages: claudeSays("Say hello.").Messages})
	if err != nil || count.InputTokens <= 0 {
		t.Errorf("CountTokens() = %+v, %v; want a count", count, err)
	}

	callClaudesTool(t, clients)
	checkClaudesCache(t, clients)

	var apiErr *anthropic.Error
	unknown := claudeSays("Say hello.")
	unknown.Model = "claude-nonesuch"
	if _, err := clients[1].Messages.New(ctx, unknown); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound ||
		apiErr.Type() != "not_found_error" || !strings.HasPrefix(apiErr.RequestID, "req_") {
		t.Errorf("New(unknown model) error = %v; want 404 not_found_error with a request id", err)
	}
	checkSpentQuotaRaisedAtOnce(t, gateways[0])
	checkMessagesJob(t, gateways)

	checkChargedAsBilled(t, url, gateways)
}

// TestAnAnthropicStreamItsClientLeavesIsChargedWhatTheAccountBilled has Anthropic's Go SDK
// leave a stream through a gateway once its first text has arrived, from an account that takes
// ten seconds a message: the account bills the prompt and the output it made before the client
// left, and the tenant is charged that, as each gateway sees it.
func TestAnAnthropicStreamItsClientLeavesIsChargedWhatTheAccountBilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider and Redis; skipped with -short")
	}
	url, gateways := startAnthropicGateways(t, "-latency", "10s")
	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	c := claudeClient(gateways[0], keyAlice)
	s := c.Messages.NewStreaming(ctx, claudeSays("Say hello."))
	for s.Next() && s.Current().Type != "content_block_delta" {
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	leave()
	s.Close()

	poll.Until(t, processWait, "the account to bill the call its client left", func() bool { return readCrowdStats(t, url).Canceled == 1 })
	made := readCrowdStats(t, url)
	if made.CompletionTokens <= 0 || made.CompletionTokens >= claudeAnswerTokens {
		t.Errorf("the account made %d output tokens before the client left; want some of its %d", made.CompletionTokens, claudeAnswerTokens)
	}
	poll.Until(t, processWait, "the gateways to charge what the account billed", func() bool { return spentByAll(t, gateways[1]) == made.MicroDollars })
	checkChargedAsBilled(t, url, gateways)
}

// checkMessagesJob sends a Messages call as a job through one gateway and reads its answer, a
// message, through the other.
func checkMessagesJob(t *testing.T, gateways [2]*gateway) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"Say hello."}]}`, claudeModel)
	added := gateways[0].addJob(t, keyAlice, `{"endpoint":"/v1/messages","body":`+body+`}`)
	done := gateways[1].waitForJob(t, keyAlice, added.ID)
	var msg anthropic.Message
	if done.Status != "succeeded" || done.Endpoint != "/v1/messages" || done.Response == nil || done.Response.StatusCode != http.StatusOK ||
		json.Unmarshal(done.Response.Body, &msg) != nil || msg.Usage.OutputTokens != claudeAnswerTokens {
		t.Errorf("a Messages job ended %+v; want it succeeded with a message of %d tokens", done, claudeAnswerTokens)
	}
}

// accumulateClaude streams params and returns the message its events make.
func accumulateClaude(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	s := c.Messages.NewStreaming(t.Context(), params)
	defer s.Close()
	var m anthropic.Message
	for s.Next() {
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatalf("Accumulate(): %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return m
}

// callClaudesTool asks for the weather through one gateway, which calls the tool, streamed
// through the other too, and answers its result through the first.
func callClaudesTool(t *testing.T, clients [2]anthropic.Client) {
	t.Helper()
	params := claudeSays("What is the weather in Paris? Use get_weather.")
	params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "get_weather", Description: anthropic.String("The weather in a city."),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
	}}}
	call, err := clients[0].Messages.New(t.Context(), params)
	if err != nil || call.StopReason != anthropic.StopReasonToolUse || call.Content[0].AsToolUse().Name != "get_weather" {
		t.Fatalf("New(with a tool) = %+v, %v; want get_weather called", call, err)
	}
	if streamed := accumulateClaude(t, clients[1], params); streamed.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("NewStreaming(with a tool) accumulates %+v; want the tool called", streamed)
	}
	params.Messages = append(params.Messages, call.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.Content[0].AsToolUse().ID, "Sunny, 21 C.", false)))
	if answer, err := clients[0].Messages.New(t.Context(), params); err != nil || answer.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("New(with the tool's result) = %+v, %v; want text", answer, err)
	}
}

// checkClaudesCache sends a system prompt of 1,250 tokens, cached for five minutes, through each
// gateway: the first call writes it, the second reads it.
func checkClaudesCache(t *testing.T, clients [2]anthropic.Client) {
	t.Helper()
	params := claudeSays("Summarise this page.")
	params.System = []anthropic.TextBlockParam{{Text: strings.Repeat("page", 1250), CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	var written, read int64
	for i, c := range clients {
		msg, err := c.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatalf("New(cached) through gateway %d: %v", i, err)
		}
		written, read = written+msg.Usage.CacheCreationInputTokens, read+msg.Usage.CacheReadInputTokens
	}
	if written != 1250 || read != 1250 {
		t.Errorf("the two calls wrote %d tokens to the cache and read %d; want 1250 each", written, read)
	}
}

// checkSpentQuotaRaisedAtOnce calls as daily, whose quota is one request a day, twice with a
// client that would retry twice: the second call is raised at once as Anthropic's
// rate_limit_error, not retried until midnight.
func checkSpentQuotaRaisedAtOnce(t *testing.T, g *gateway) {
	t.Helper()
	var mu sync.Mutex
	var statuses []int
	c := claudeClient(g, keyDave, option.WithMaxRetries(2), option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if err == nil {
			mu.Lock()
			statuses = append(statuses, resp.StatusCode)
			mu.Unlock()
		}
		return resp, err
	}))
	if _, err := c.Messages.New(t.Context(), claudeSays("Say hello.")); err != nil {
		t.Fatalf("daily's first call: %v", err)
	}
	var apiErr *anthropic.Error
	_, err := c.Messages.New(t.Context(), claudeSays("Say hello."))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != "rate_limit_error" {
		t.Errorf("daily's second call: %v; want 429 rate_limit_error", err)
	}
	if !slices.Equal(statuses, []int{http.StatusOK, http.StatusTooManyRequests}) {
		t.Errorf("daily's client received %v; want 200, then one 429 it did not retry", statuses)
	}
}

// anthropicNodeResult is what testdata/anthropic-node-sdk.js prints.
type anthropicNodeResult struct {
	Message struct {
		Text                string
		Input, Output       int
		StopReason          string
		RequestIDFromHeader bool
	}
	Stream struct {
		Text   string
		Output int
		Events []string
	}
	Count struct{ Input int }
	Tool  struct {
		Name, StopReason, AnswerStopReason string
	}
	Cache          struct{ Written, Read int }
	Unknown, Spent struct {
		Status     int
		Type, Name string
		RequestID  string
	}
	SpentAnswers []int
}

// TestAnthropicNodeSDKThroughTwoGatewaysIsChargedAsBilled runs Anthropic's official npm package,
// unmodified but for its base URL and key, through two gateways on one Redis to the lab's
// Anthropic account: a message, a stream, a count, a tool and a cached prompt, charged exactly
// what the account billed, and the errors the SDK raises. It needs node and npm, and installs
// the package once under bin/ (hack/anthropic-node-sdk.sh).
func TestAnthropicNodeSDKThroughTwoGatewaysIsChargedAsBilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider, Redis and node; skipped with -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node SDK cannot run (install Node.js 20 or later to run this test)", tool)
		}
	}
	modules, err := exec.Command("../../hack/anthropic-node-sdk.sh").Output()
	if err != nil {
		t.Fatalf("install the @anthropic-ai/sdk npm package: %v", err)
	}
	url, gateways := startAnthropicGateways(t)
	cmd := exec.Command("node", "testdata/anthropic-node-sdk.js", gateways[0].api, gateways[1].api, keyAlice, keyDave)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.TrimSpace(string(modules)))
	cmd.Stderr = os.Stderr
	printed, err := cmd.Output()
	if err != nil {
		t.Fatalf("anthropic-node-sdk.js: %v", err)
	}
	var got anthropicNodeResult
	if err := json.Unmarshal(printed, &got); err != nil {
		t.Fatalf("anthropic-node-sdk.js printed %s: %v", printed, err)
	}
	if m := got.Message; m.Text == "" || m.Output != claudeAnswerTokens || m.Input <= 0 || m.StopReason != "end_turn" || !m.RequestIDFromHeader {
		t.Errorf("message: %+v; want %d tokens of text, ended, with the request-id header", m, claudeAnswerTokens)
	}
	if s := got.Stream; s.Text == "" || s.Output != claudeAnswerTokens || !slices.Equal(s.Events[:1], []string{"message_start"}) || s.Events[len(s.Events)-1] != "message_stop" {
		t.Errorf("stream: %+v; want its text and usage, from message_start to message_stop", s)
	}
	if got.Count.Input <= 0 || got.Tool.Name != "get_weather" || got.Tool.StopReason != "tool_use" || got.Tool.AnswerStopReason != "end_turn" {
		t.Errorf("count %+v, tool %+v; want a count, get_weather called and answered", got.Count, got.Tool)
	}
	if got.Cache.Written != 1250 || got.Cache.Read != 1250 {
		t.Errorf("cache: %+v; want 1250 tokens written through one gateway and read through the other", got.Cache)
	}
	if u := got.Unknown; u.Status != http.StatusNotFound || u.Type != "not_found_error" || u.Name != "NotFoundError" || !strings.HasPrefix(u.RequestID, "req_") {
		t.Errorf("unknown model: %+v; want NotFoundError, not_found_error, with a request id", u)
	}
	if s := got.Spent; s.Status != http.StatusTooManyRequests || s.Type != "rate_limit_error" || s.Name != "RateLimitError" ||
		!slices.Equal(got.SpentAnswers, []int{http.StatusOK, http.StatusTooManyRequests}) {
		t.Errorf("a day's quota spent: %+v after answers %v; want one 429 rate_limit_error, raised at once", s, got.SpentAnswers)
	}
	checkChargedAsBilled(t, url, gateways)
}

// checkChargedAsBilled checks that the tenants were charged, together, what the Anthropic
// account at url billed, as each of the gateways sees it.
func checkChargedAsBilled(t *testing.T, url string, gateways [2]*gateway) {
	t.Helper()
	billed := readLabStats(t, url).MicroDollars
	for i, g := range gateways {
		if got := spentByAll(t, g); got != billed || billed == 0 {
			t.Errorf("gateway %d: the tenants were charged %d micro-dollars; the account billed %d", i, got, billed)
		}
	}
	t.Logf("the tenants were charged $%.6f for their calls through two gateways; the account billed $%.6f", float64(spentByAll(t, gateways[0]))/1e6, float64(billed)/1e6)
}

// spentByAll is what every tenant has spent this period, together.
func spentByAll(t *testing.T, g *gateway) int64 {
	t.Helper()
	var sum int64
	for _, u := range g.usage(t).Tenants {
		micros, err := u.SpendThisPeriod.MicroDollars()
		if err != nil {
			t.Fatal(err)
		}
		sum += micros
	}
	return sum
}
