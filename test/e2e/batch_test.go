package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// batchGateways are two gateways on one Redis in front of the SDK provider (see sdkConfig):
// acme calls as it likes, burst is another tenant, daily may send one request a day.
func batchGateways(t *testing.T) ([2]*gateway, *sdkProvider) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	p := newSDKProvider(t)
	redis := redisserver.Start(t)
	config := sdkConfig(t, p.URL)
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	withRedis := strings.Replace(string(data), "kind: GatewayConfig\n", "kind: GatewayConfig\n"+redisStore(redis.Addr)+"\njobs: {workers: 2}\n", 1)
	config = filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(config, []byte(withRedis), 0o600); err != nil {
		t.Fatal(err)
	}
	return [2]*gateway{startGateway(t, config), startGateway(t, config)}, p
}

// batchInput is a batch's input of n chat completions.
func batchInput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}}`+"\n", i+1)
	}
	return b.String()
}

func sdkClient(g *gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.api+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// goSDKBatch uploads input through one client, makes its batch through another, polls it
// through the first and returns it when it ends.
func goSDKBatch(t *testing.T, upload, create openai.Client, input string) *openai.Batch {
	t.Helper()
	ctx := context.Background()
	f, err := upload.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(input), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	b, err := create.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("create a batch: %v", err)
	}
	poll.Until(t, processWait, "batch "+b.ID+" to end", func() bool {
		if b, err = upload.Batches.Get(ctx, b.ID); err != nil {
			t.Fatalf("get the batch: %v", err)
		}
		return b.Status == openai.BatchStatusCompleted || b.Status == openai.BatchStatusFailed || b.Status == openai.BatchStatusExpired
	})
	return b
}

// linesOf reads a file of JSON lines through c.
func linesOf(t *testing.T, c openai.Client, id string) []map[string]any {
	t.Helper()
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("read file %s: %v", id, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("file %s: a line that is not JSON: %q", id, line)
		}
		out = append(out, m)
	}
	return out
}

// lineStatus is the response status of an output or error line, and its body's error code.
func lineStatus(line map[string]any) (int, string) {
	resp, _ := line["response"].(map[string]any)
	status, _ := resp["status_code"].(float64)
	body, _ := resp["body"].(map[string]any)
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return int(status), code
}

// TestBatchesThroughTwoGatewaysWithTheGoSDK runs the official Go SDK, unmodified, against two
// gateways on one Redis: a file uploaded through one, its batch made through the other, run by
// the workers of both, polled and read through either. A tenant whose day's quota runs out in the
// middle of its batch gets the rest failed as a live call would be; another tenant finds
// neither the file nor the batch.
func TestBatchesThroughTwoGatewaysWithTheGoSDK(t *testing.T) {
	gateways, p := batchGateways(t)
	acme := [2]openai.Client{sdkClient(gateways[0], keyAlice), sdkClient(gateways[1], keyAlice)}
	b := goSDKBatch(t, acme[0], acme[1], batchInput(6))
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != 6 || b.RequestCounts.Failed != 0 || b.ErrorFileID != "" {
		t.Fatalf("batch %s, counts %+v, error file %q; want all 6 lines completed", b.Status, b.RequestCounts, b.ErrorFileID)
	}
	output := linesOf(t, acme[1], b.OutputFileID)
	for i, line := range output {
		status, _ := lineStatus(line)
		if line["custom_id"] != fmt.Sprintf("line-%d", i+1) || status != http.StatusOK {
			t.Errorf("output line %d: %v; want line-%d answered 200", i+1, line, i+1)
		}
	}
	if len(output) != 6 || p.count("/v1/chat/completions") != 6 {
		t.Errorf("%d output lines, %d calls at the provider; want 6 of each", len(output), p.count("/v1/chat/completions"))
	}

	daily := sdkClient(gateways[1], keyDave)
	b = goSDKBatch(t, daily, sdkClient(gateways[0], keyDave), batchInput(3))
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != 1 || b.RequestCounts.Failed != 2 {
		t.Fatalf("daily's batch %s, counts %+v; want completed with 1 line served and 2 failed at the day's quota", b.Status, b.RequestCounts)
	}
	for _, line := range linesOf(t, daily, b.ErrorFileID) {
		if status, code := lineStatus(line); status != http.StatusTooManyRequests || code != "insufficient_quota" {
			t.Errorf("a line past the day's quota: %v; want 429 insufficient_quota, as a live call", line)
		}
	}

	other := sdkClient(gateways[0], keyBob)
	var apiErr *openai.Error
	if _, err := other.Batches.Get(context.Background(), b.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant reads the batch: %v; want 404", err)
	}
	if _, err := other.Files.Content(context.Background(), b.OutputFileID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant reads the output: %v; want 404", err)
	}
}

// nodeBatchResult is what testdata/node-batch.js prints.
type nodeBatchResult struct {
	Status        string
	RequestCounts struct{ Total, Completed, Failed int } `json:"request_counts"`
	Output        []string
	Errors        []string
	Refused       struct {
		Status int
		Code   string
	}
}

// TestBatchesThroughTwoGatewaysWithTheNodeSDK runs the official openai npm package, unmodified,
// through two gateways on one Redis: an upload, a batch, its polling and its output and error
// files, each through either gateway, and a batch whose file fails validation.
func TestBatchesThroughTwoGatewaysWithTheNodeSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary and node; skipped with -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node SDK cannot run (install Node.js 20 or later to run this test)", tool)
		}
	}
	modules, err := exec.Command("../../hack/node-sdk.sh").Output()
	if err != nil {
		t.Fatalf("install the openai npm package: %v", err)
	}
	gateways, p := batchGateways(t)
	cmd := exec.Command("node", "testdata/node-batch.js", gateways[0].api+"/v1", gateways[1].api+"/v1", keyDave)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.TrimSpace(string(modules)))
	cmd.Stderr = os.Stderr
	printed, err := cmd.Output()
	if err != nil {
		t.Fatalf("node-batch.js: %v", err)
	}
	var got nodeBatchResult
	if err := json.Unmarshal(printed, &got); err != nil {
		t.Fatalf("node-batch.js printed %s: %v", printed, err)
	}
	if got.Status != "completed" || got.RequestCounts.Total != 3 || got.RequestCounts.Completed != 1 || got.RequestCounts.Failed != 2 {
		t.Errorf("batch %s with counts %+v; want completed, 1 of 3 served before the day's quota and 2 failed at it", got.Status, got.RequestCounts)
	}
	all := slices.Sorted(slices.Values(append(got.Output, got.Errors...)))
	if len(got.Output) != 1 || !slices.Equal(all, []string{"line-1", "line-2", "line-3"}) {
		t.Errorf("output %v, errors %v; want one line in the output and the two others in the errors", got.Output, got.Errors)
	}
	if got.Refused.Status != 0 || got.Refused.Code != "invalid_json_line" {
		t.Errorf("a batch of a file that is not JSON lines: %+v; want it failed with invalid_json_line", got.Refused)
	}
	if n := p.count("/v1/chat/completions"); n != 1 {
		t.Errorf("the provider got %d calls; want 1", n)
	}
}

// TestABatchSurvivesTheKillOfAGateway kills (SIGKILL) the gateway that made a batch while one of
// its lines is at the provider: another gateway on the same Redis takes the line over, runs the
// rest and ends the batch, and every line is in its output once.
func TestABatchSurvivesTheKillOfAGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	const marker = "Say hello as a batch's line."
	up, held, _ := holdingUpstream(t, marker)
	redis := redisserver.Start(t)
	config := jobsConfig(t, up.URL, redisStore(redis.Addr), "jobs: {maxAttempts: 3, reclaimAfter: 1s, workers: 1}")
	a := startGateway(t, config)
	var input strings.Builder
	for i := range 4 {
		body := chatBody
		if i == 0 {
			body = strings.Replace(chatBody, "Say hello.", marker, 1)
		}
		fmt.Fprintf(&input, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i+1, body)
	}
	ctx := context.Background()
	client := sdkClient(a, keyAlice)
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(input.String()), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	<-held // the first line's call is at the provider
	if err := syscall.Kill(a.proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.proc.Exited()

	other := sdkClient(startGateway(t, config), keyAlice)
	poll.Until(t, processWait, "the batch to end", func() bool {
		if b, err = other.Batches.Get(ctx, b.ID); err != nil {
			t.Fatalf("get the batch: %v", err)
		}
		return b.Status == openai.BatchStatusCompleted
	})
	output := linesOf(t, other, b.OutputFileID)
	if b.RequestCounts.Completed != 4 || len(output) != 4 || output[0]["custom_id"] != "line-1" {
		t.Errorf("counts %+v, output %v; want the 4 lines, the one at the provider when its gateway died among them", b.RequestCounts, output)
	}
}

// TestABatchForASelfHostedModelRunsThroughTheQueue runs a batch for a model the lab's simulated
// inference server serves, a self-hosted provider without a batch service: its lines go as jobs
// through the gateway's queue, within the server's calls in flight, and the batch completes.
func TestABatchForASelfHostedModelRunsThroughTheQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway and the lab binaries; skipped with -short")
	}
	addr := freeAddr(t)
	proc.Start(t, "lab-inference", exec.Command(labBin, "inference", "-listen", addr, "-model", "llama", "-max-num-seqs", "4",
		"-token-latency", "1ms", "-default-max-tokens", "8"))
	poll.Until(t, processWait, "the inference server to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	config := filepath.Join(t.TempDir(), "sluice.yaml")
	writeAtomically(t, config, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: llama
    baseURL: http://%s/v1
    models: [{name: llama, defaultMaxTokens: 8, maxTokensParam: max_tokens}]
    maxInFlight: 4
    prices: {inputPerMillion: "0.10", outputPerMillion: "0.10"}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [llama]
`, addr, gatewayv1.HashKey(keyAlice)))
	g := startGateway(t, config)
	var input strings.Builder
	const lines = 50
	for i := range lines {
		fmt.Fprintf(&input, `{"custom_id":"page-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"llama","messages":[{"role":"user","content":"Summarize page %d."}]}}`+"\n", i+1, i+1)
	}
	client := sdkClient(g, keyAlice)
	b := goSDKBatch(t, client, client, input.String())
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != lines {
		t.Fatalf("batch %s, counts %+v; want all %d lines completed", b.Status, b.RequestCounts, lines)
	}
	for _, line := range linesOf(t, client, b.OutputFileID) {
		resp := line["response"].(map[string]any)
		usage, _ := resp["body"].(map[string]any)["usage"].(map[string]any)
		if usage["completion_tokens"] != float64(8) {
			t.Errorf("line %v: usage %v; want the 8 completion tokens of its cap", line["custom_id"], usage)
		}
	}
	resp, err := adminGet(g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf(`sluice_gateway_batch_lines_total{outcome="completed",tenant="acme"} %d`, lines); !strings.Contains(string(metrics), want) {
		t.Errorf("the gateway's metrics do not hold %s", want)
	}
}

// The lab's OpenAI account for batches on its batch service, and the key the gateways call it
// with. Each batch of serviceLines lines holds about serviceLines × 1,010 tokens enqueued, and the
// account, and the gateways, hold at most serviceQueueTokens: one batch at a time.
const (
	serviceAPIKey      = "sk-lab-batch-service"
	serviceLines       = 3
	serviceQueueTokens = 4000
)

// serviceGateways runs the lab's OpenAI account with its batch service, a batch taking a second,
// and two gateways on one Redis in front of it whose batches run there, for acme (keyAlice)
// with a month's budget. It returns the account's URL and the gateways.
func serviceGateways(t *testing.T) (string, [2]*gateway) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Redis and the gateway and lab binaries; skipped with -short")
	}
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-api-key", serviceAPIKey, "-latency", "1ms",
		"-latency-stddev", "0", "-batch-delay", "1s", "-batch-queue-tokens", fmt.Sprint(serviceQueueTokens), "-input-price", "3", "-output-price", "3"))
	url := "http://" + addr
	poll.Until(t, processWait, "the lab provider to listen", func() bool {
		resp, err := http.Get(url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	keyFile := filepath.Join(t.TempDir(), "provider-key")
	writeAtomically(t, keyFile, serviceAPIKey)
	redis := redisserver.Start(t)
	config := writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store: {type: redis, redis: {address: %q, failMode: closed, replicas: 2}}
providers:
  - name: openai
    baseURL: %s/v1
    apiKeyFile: %s
    models: [{name: gpt-4o-mini, encoding: o200k_base}]
    prices: {inputPerMillion: "3.00", outputPerMillion: "3.00"}
    batches: Service
    batchQueueTokens: %d
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [openai]
    budget: {amount: "100.00", period: month}
`, redis.Addr, url, keyFile, serviceQueueTokens, gatewayv1.HashKey(keyAlice)))
	return url, [2]*gateway{startGateway(t, config), startGateway(t, config)}
}

// serviceInput is a batch's input of serviceLines chat lines, each capped at 1,000 tokens.
func serviceInput(batch int) string {
	var b strings.Builder
	for i := range serviceLines {
		fmt.Fprintf(&b, `{"custom_id":"b%d-line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"Say hello."}]}}`+"\n", batch, i+1)
	}
	return b.String()
}

// TestBatchesOnTheProvidersBatchServiceWithTheGoSDK runs two batches with the official Go SDK
// through two gateways on one Redis whose provider runs batches on its batch service: each goes
// to the lab's account with the account's key, the second only once the first has left room in
// the tokens the account holds enqueued (the account never refuses one), and the tenant is
// charged what the account billed, at its batch prices.
func TestBatchesOnTheProvidersBatchServiceWithTheGoSDK(t *testing.T) {
	url, gateways := serviceGateways(t)
	clients := [2]openai.Client{sdkClient(gateways[0], keyAlice), sdkClient(gateways[1], keyAlice)}
	ctx := context.Background()
	var made []*openai.Batch
	for i := range 2 {
		f, err := clients[i].Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(serviceInput(i+1)), "in.jsonl", "application/jsonl"),
			Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		b, err := clients[1-i].Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatalf("create batch %d: %v", i+1, err)
		}
		made = append(made, b)
	}
	for i, b := range made {
		poll.Until(t, processWait, "batch "+b.ID+" to end", func() bool {
			var err error
			if b, err = clients[i].Batches.Get(ctx, b.ID); err != nil {
				t.Fatalf("get the batch: %v", err)
			}
			return b.Status == openai.BatchStatusCompleted || b.Status == openai.BatchStatusFailed
		})
		if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != serviceLines {
			t.Fatalf("batch %d: %s, counts %+v, errors %+v; want completed with its %d lines", i+1, b.Status, b.RequestCounts, b.Errors, serviceLines)
		}
		output := linesOf(t, clients[1-i], b.OutputFileID)
		if len(output) != serviceLines || output[0]["custom_id"] != fmt.Sprintf("b%d-line-1", i+1) {
			t.Errorf("batch %d's output %v; want its %d lines", i+1, output, serviceLines)
		}
	}
	stats := readLabStats(t, url)
	if stats.BatchLines != 2*serviceLines || stats.BatchesRefused != 0 {
		t.Errorf("the account served %d batch lines and refused %d batches; want %d lines and none refused: the gateways hold a batch back until the account has room for it",
			stats.BatchLines, stats.BatchesRefused, 2*serviceLines)
	}
	if spent := spentByAll(t, gateways[0]); spent < stats.MicroDollars-2*serviceLines || spent > stats.MicroDollars+2*serviceLines {
		t.Errorf("acme was charged %d micro-dollars; want what the account billed at its batch prices, %d, each batch rounded once", spent, stats.MicroDollars)
	}
}

// TestBatchesOnTheProvidersBatchServiceWithTheNodeSDK runs the official openai npm package,
// unmodified, through two gateways on one Redis whose provider runs batches on its batch service:
// an upload, a batch, its polling and its output, each through either gateway, and a batch whose
// file fails validation before anything reaches the provider.
func TestBatchesOnTheProvidersBatchServiceWithTheNodeSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary and node; skipped with -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node SDK cannot run (install Node.js 20 or later to run this test)", tool)
		}
	}
	modules, err := exec.Command("../../hack/node-sdk.sh").Output()
	if err != nil {
		t.Fatalf("install the openai npm package: %v", err)
	}
	url, gateways := serviceGateways(t)
	cmd := exec.Command("node", "testdata/node-batch.js", gateways[0].api+"/v1", gateways[1].api+"/v1", keyAlice)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.TrimSpace(string(modules)))
	cmd.Stderr = os.Stderr
	printed, err := cmd.Output()
	if err != nil {
		t.Fatalf("node-batch.js: %v", err)
	}
	var got nodeBatchResult
	if err := json.Unmarshal(printed, &got); err != nil {
		t.Fatalf("node-batch.js printed %s: %v", printed, err)
	}
	if got.Status != "completed" || got.RequestCounts.Completed != 3 || !slices.Equal(got.Output, []string{"line-1", "line-2", "line-3"}) || len(got.Errors) != 0 {
		t.Errorf("batch %s with counts %+v, output %v, errors %v; want completed, its 3 lines in its output", got.Status, got.RequestCounts, got.Output, got.Errors)
	}
	if got.Refused.Status != 0 || got.Refused.Code != "invalid_json_line" {
		t.Errorf("a batch of a file that is not JSON lines: %+v; want it failed with invalid_json_line", got.Refused)
	}
	if stats := readLabStats(t, url); stats.BatchLines != 3 {
		t.Errorf("the account served %d batch lines; want 3", stats.BatchLines)
	}
}
