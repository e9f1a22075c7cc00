package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
)

// The usage the batch provider reports for every call, priced at the settle table's $1 and $2 a
// million tokens: 10 + 2 × 50 micro-dollars.
const (
	batchPromptTokens     = 10
	batchCompletionTokens = 50
	batchLineMicros       = batchPromptTokens + 2*batchCompletionTokens
)

// batchProvider answers chat completions with a fixed usage, and refuses with 400 a call whose
// prompt says "refuse me". It counts the calls it receives.
func batchProvider(t *testing.T) (*httptest.Server, *atomic.Int64) {
	calls := &atomic.Int64{}
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), "refuse me") {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"The provider refuses this.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello."}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			batchPromptTokens, batchCompletionTokens, batchPromptTokens+batchCompletionTokens)
	}))
	t.Cleanup(p.Close)
	return p, calls
}

// batchGateway is the settle table's gateway, with globex besides acme, serving its API and
// running its jobs, and the Go SDK as acme and as globex.
type batchGateway struct {
	*settleGateway
	acme, globex openai.Client
}

func newBatchGateway(t *testing.T, cfg *gatewayv1.Config) *batchGateway {
	t.Helper()
	cfg.Tenants = append(cfg.Tenants, gatewayv1.Tenant{Name: "globex", Providers: []string{"lab"},
		Keys: []gatewayv1.Key{{SHA256: gatewayv1.HashKey(globexKey), User: "bob"}}})
	cfg.Default()
	g := &batchGateway{settleGateway: newSettleGatewayAt(t, cfg, time.Now)}
	api := httptest.NewServer(g.Handler())
	t.Cleanup(api.Close)
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	g.acme, g.globex = client(settleKey), client(globexKey)
	return g
}

// runJobs runs the gateway's jobs until the test ends.
func (g *batchGateway) runJobs(t *testing.T) *batchGateway {
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.RunJobs(ctx, 4, time.Second, time.Second)
	}()
	t.Cleanup(func() { stop(); <-stopped })
	return g
}

// chatLine is a line of a batch's input: a chat completion of the settle table's model.
func chatLine(customID, prompt string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":%d,"messages":[{"role":"user","content":%q}]}}`,
		customID, batchCompletionTokens, prompt)
}

// upload uploads lines as a batch's input file.
func upload(t *testing.T, c openai.Client, lines ...string) *openai.FileObject {
	t.Helper()
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader(strings.Join(lines, "\n")+"\n"), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatalf("upload a batch's input: %v", err)
	}
	return f
}

// runBatch makes a batch of the file and polls it until it ends.
func runBatch(t *testing.T, c openai.Client, file string) *openai.Batch {
	t.Helper()
	ctx := context.Background()
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: file, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("create a batch: %v", err)
	}
	poll.Until(t, time.Minute, "batch "+b.ID+" to end", func() bool {
		if b, err = c.Batches.Get(ctx, b.ID); err != nil {
			t.Fatalf("get batch: %v", err)
		}
		return b.Status == openai.BatchStatusCompleted || b.Status == openai.BatchStatusFailed || b.Status == openai.BatchStatusExpired ||
			b.Status == openai.BatchStatusCancelled
	})
	return b
}

// fileLines reads a file's lines as JSON objects.
func fileLines(t *testing.T, c openai.Client, id string) []map[string]any {
	t.Helper()
	if id == "" {
		return nil
	}
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
			t.Fatalf("file %s holds a line that is not JSON: %q", id, line)
		}
		out = append(out, m)
	}
	return out
}

// statusOf is the response status of a line of an output or error file, or 0 when it has none.
func statusOf(line map[string]any) int {
	resp, _ := line["response"].(map[string]any)
	status, _ := resp["status_code"].(float64)
	return int(status)
}

func TestABatchRunsItsLinesAsJobsAndWritesItsOutputAndErrors(t *testing.T) {
	provider, calls := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL)).runJobs(t)
	in := upload(t, g.acme, chatLine("a", "Say hello."), chatLine("b", "refuse me"), chatLine("c", "Say hello again."))
	b := runBatch(t, g.acme, in.ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Total != 3 || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 1 {
		t.Fatalf("batch %s with counts %+v; want completed, 2 of 3 completed and 1 failed", b.Status, b.RequestCounts)
	}
	output := fileLines(t, g.acme, b.OutputFileID)
	if len(output) != 2 || output[0]["custom_id"] != "a" || output[1]["custom_id"] != "c" || statusOf(output[0]) != http.StatusOK {
		t.Errorf("output %v; want lines a and c, in the input's order, each 200", output)
	}
	errs := fileLines(t, g.acme, b.ErrorFileID)
	if len(errs) != 1 || errs[0]["custom_id"] != "b" || statusOf(errs[0]) != http.StatusBadRequest {
		t.Errorf("errors %v; want line b with the provider's 400", errs)
	}
	if calls.Load() != 3 {
		t.Errorf("the provider got %d calls; want 3", calls.Load())
	}
	if got := g.charged(t); got.micros != 2*batchLineMicros || got.requests != 2 {
		t.Errorf("charged %+v; want the 2 lines served at their usage, %d micro-dollars, and their 2 requests (a call refused gives its request back, as a live one does)",
			got, 2*batchLineMicros)
	}
	list, err := g.acme.Batches.List(context.Background(), openai.BatchListParams{})
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != b.ID {
		t.Errorf("acme's batches %+v, %v; want the one", list, err)
	}
}

func TestABatchWhoseLinesFailValidationFailsBeforeAnythingIsSent(t *testing.T) {
	provider, calls := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL)).runJobs(t)
	in := upload(t, g.acme,
		chatLine("a", "Say hello."),
		`{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", "body": `, // not JSON
		chatLine("a", "a custom_id used again"),
		`{"custom_id":"d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}}`,
		`{"custom_id":"e","method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":100000000,"messages":[{"role":"user","content":"hi"}]}}`,
		`{"custom_id":"f","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"hi"}}`,
	)
	b := runBatch(t, g.acme, in.ID)
	if b.Status != openai.BatchStatusFailed {
		t.Fatalf("batch %s; want failed", b.Status)
	}
	want := map[int64]string{2: "invalid_json_line", 3: "duplicate_custom_id", 4: "model_not_found", 5: "request_too_large", 6: "invalid_url"}
	got := map[int64]string{}
	for _, e := range b.Errors.Data {
		got[e.Line] = e.Code
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the batch's errors by line %v; want %v", got, want)
	}
	if calls.Load() != 0 || g.charged(t) != (charged{}) {
		t.Errorf("the provider got %d calls and acme was charged %+v; want nothing sent, nothing charged", calls.Load(), g.charged(t))
	}
}

func TestAnotherTenantsFilesAndBatchesAreNotFound(t *testing.T) {
	provider, _ := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL)).runJobs(t)
	ctx := context.Background()
	in := upload(t, g.acme, chatLine("a", "Say hello."))
	b := runBatch(t, g.acme, in.ID)
	notFound := func(what string, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("globex %s of acme's: %v; want 404", what, err)
		}
	}
	_, err := g.globex.Files.Get(ctx, in.ID)
	notFound("reads a file", err)
	_, err = g.globex.Files.Content(ctx, b.OutputFileID)
	notFound("reads the content of a file", err)
	_, err = g.globex.Files.Delete(ctx, in.ID)
	notFound("deletes a file", err)
	_, err = g.globex.Batches.Get(ctx, b.ID)
	notFound("reads a batch", err)
	_, err = g.globex.Batches.Cancel(ctx, b.ID)
	notFound("cancels a batch", err)
	_, err = g.globex.Batches.New(ctx, openai.BatchNewParams{InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	notFound("makes a batch of a file", err)
	if files, err := g.globex.Files.List(ctx, openai.FileListParams{}); err != nil || len(files.Data) != 0 {
		t.Errorf("globex lists files %+v, %v; want none", files, err)
	}
	if files, err := g.acme.Files.List(ctx, openai.FileListParams{}); err != nil || len(files.Data) != 2 {
		t.Errorf("acme lists files %+v, %v; want its input and the batch's output", files, err)
	}
	if _, err := g.acme.Files.Delete(ctx, in.ID); err != nil {
		t.Errorf("acme deletes its file: %v", err)
	}
	_, err = g.acme.Files.Get(ctx, in.ID)
	notFound("(acme) reads a file it deleted", err)
}

func TestAFileForAnotherPurposeIsRefused(t *testing.T) {
	provider, _ := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL)).runJobs(t)
	_, err := g.acme.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader("{}"), "tune.jsonl", "application/jsonl"), Purpose: openai.FilePurposeFineTune,
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "purpose" {
		t.Errorf("a file for fine-tuning: %v; want 400 on purpose", err)
	}
}

func TestABatchPastItsTenantsBudgetStopsAtIt(t *testing.T) {
	provider, _ := batchProvider(t)
	cfg := settleConfig(provider.URL)
	const budgetLines = 5
	cfg.Tenants[0].Budget = &gatewayv1.Budget{Amount: gatewayv1.Money(fmt.Sprintf("0.%06d", budgetLines*batchLineMicros)), Period: gatewayv1.PeriodMonth}
	g := newBatchGateway(t, cfg).runJobs(t)
	var lines []string
	for i := range 3 * budgetLines {
		lines = append(lines, chatLine(fmt.Sprint(i), "Say hello."))
	}
	b := runBatch(t, g.acme, upload(t, g.acme, lines...).ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed < budgetLines-1 || b.RequestCounts.Completed > budgetLines ||
		b.RequestCounts.Failed != int64(len(lines))-b.RequestCounts.Completed {
		t.Errorf("batch %s with counts %+v; want completed with about %d lines served and the rest failed", b.Status, b.RequestCounts, budgetLines)
	}
	for _, line := range fileLines(t, g.acme, b.ErrorFileID) {
		body, _ := line["response"].(map[string]any)["body"].(map[string]any)
		if statusOf(line) != http.StatusTooManyRequests || body["error"].(map[string]any)["code"] != codeQuotaSpent {
			t.Errorf("a line past the budget: %v; want the 429 insufficient_quota a live call gets", line)
		}
	}
	if got := g.charged(t).micros; got > budgetLines*batchLineMicros+batchLineMicros {
		t.Errorf("charged %d micro-dollars; want at most the budget, %d, and one line's estimate", got, budgetLines*batchLineMicros)
	}
}

func TestACancelledBatchSendsNoMoreLines(t *testing.T) {
	provider, calls := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL)) // no worker runs a line until it is cancelled
	ctx := context.Background()
	in := upload(t, g.acme, chatLine("a", "Say hello."), chatLine("b", "Say hello."))
	b, err := g.acme.Batches.New(ctx, openai.BatchNewParams{InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = g.acme.Batches.Cancel(ctx, b.ID); err != nil || b.Status != openai.BatchStatusCancelling {
		t.Fatalf("cancel: %+v, %v; want cancelling", b, err)
	}
	g.runJobs(t)
	poll.Until(t, time.Minute, "the batch to be cancelled", func() bool {
		b, err = g.acme.Batches.Get(ctx, b.ID)
		return err == nil && b.Status == openai.BatchStatusCancelled
	})
	errs := fileLines(t, g.acme, b.ErrorFileID)
	if len(errs) != 2 || b.OutputFileID != "" || calls.Load() != 0 {
		t.Fatalf("error file %v, output %q, %d calls; want both lines failed, none sent", errs, b.OutputFileID, calls.Load())
	}
	if code := errs[0]["error"].(map[string]any)["code"]; code != "batch_cancelled" {
		t.Errorf("a cancelled line's error code %v; want batch_cancelled", code)
	}
	var apiErr *openai.Error
	if _, err := g.acme.Batches.Cancel(ctx, b.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Errorf("cancelling a cancelled batch: %v; want 409", err)
	}
}

// movingClock is a time the test moves on.
type movingClock struct{ offset atomic.Int64 }

func (c *movingClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *movingClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestABatchPastItsWindowExpiresWithTheLinesItFinished(t *testing.T) {
	held := make(chan struct{})
	release := make(chan struct{})
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "hold me") {
			close(held)
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`,
			batchPromptTokens, batchCompletionTokens)
	}))
	t.Cleanup(provider.Close)
	t.Cleanup(func() { close(release) })
	cfg := settleConfig(provider.URL)
	cfg.Tenants = append(cfg.Tenants, gatewayv1.Tenant{Name: "globex", Providers: []string{"lab"},
		Keys: []gatewayv1.Key{{SHA256: gatewayv1.HashKey(globexKey), User: "bob"}}})
	cfg.Default()
	clock := &movingClock{}
	g := &batchGateway{settleGateway: newSettleGatewayAt(t, cfg, clock.now)}
	api := httptest.NewServer(g.Handler())
	t.Cleanup(api.Close)
	g.acme = openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey(settleKey), option.WithMaxRetries(0))
	ctx := context.Background()
	in := upload(t, g.acme, chatLine("a", "Say hello."), chatLine("b", "hold me"), chatLine("c", "Say hello."))
	b, err := g.acme.Batches.New(ctx, openai.BatchNewParams{InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	// One worker: line a ends, line b is held at its provider, line c waits.
	ctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.RunJobs(ctx, 1, time.Second, time.Second)
	}()
	t.Cleanup(func() { stop(); <-stopped })
	<-held
	clock.advance(completionWindowLength + expiryGrace + time.Second)
	poll.Until(t, time.Minute, "the batch to expire", func() bool {
		b, err = g.acme.Batches.Get(context.Background(), b.ID)
		return err == nil && b.Status == openai.BatchStatusExpired
	})
	if output := fileLines(t, g.acme, b.OutputFileID); len(output) != 1 || output[0]["custom_id"] != "a" {
		t.Errorf("the expired batch's output %v; want line a, which finished before its window passed", output)
	}
	if b.RequestCounts.Completed != 1 || b.RequestCounts.Total != 3 {
		t.Errorf("counts %+v; want 1 of 3 completed", b.RequestCounts)
	}
}

func TestALineTakenAfterItsWindowIsNotSent(t *testing.T) {
	provider, calls := batchProvider(t)
	cfg := settleConfig(provider.URL)
	cfg.Default()
	clock := &movingClock{}
	g := &batchGateway{settleGateway: newSettleGatewayAt(t, cfg, clock.now)}
	api := httptest.NewServer(g.Handler())
	t.Cleanup(api.Close)
	g.acme = openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey(settleKey), option.WithMaxRetries(0))
	in := upload(t, g.acme, chatLine("a", "Say hello."), chatLine("b", "Say hello."))
	created, err := g.acme.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(completionWindowLength + time.Second)
	g.runJobs(t)
	var b *openai.Batch
	poll.Until(t, time.Minute, "the batch to expire", func() bool {
		b, err = g.acme.Batches.Get(context.Background(), created.ID)
		return err == nil && b.Status == openai.BatchStatusExpired
	})
	errs := fileLines(t, g.acme, b.ErrorFileID)
	if len(errs) != 2 || errs[0]["error"].(map[string]any)["code"] != "batch_expired" || calls.Load() != 0 {
		t.Errorf("errors %v after %d calls; want both lines batch_expired, none sent", errs, calls.Load())
	}
}

// BenchmarkMakeABatchOf10000Lines makes a batch of 10,000 chat lines on the memory stores: each
// line read and checked as a live call, then added as a job.
func BenchmarkMakeABatchOf10000Lines(b *testing.B) {
	cfg := settleConfig(noProvider)
	cfg.Jobs.MaxQueuedPerTenant = 1_000_000
	cfg.Jobs.MaxBytesPerTenant = 1 << 30
	g := newSettleGatewayAt(b, cfg, time.Now)
	api := httptest.NewServer(g.Handler())
	b.Cleanup(api.Close)
	c := openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey(settleKey), option.WithMaxRetries(0))
	var lines []string
	for i := range 10000 {
		lines = append(lines, chatLine(fmt.Sprint(i), "Summarize the following page of the book in two sentences, keeping its names."))
	}
	in := strings.Join(lines, "\n")
	for b.Loop() {
		f, err := c.Files.New(context.Background(), openai.FileNewParams{File: openai.File(strings.NewReader(in), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
		if err != nil {
			b.Fatal(err)
		}
		batch, err := c.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil || batch.RequestCounts.Total != 10000 {
			b.Fatalf("batch %+v, %v", batch, err)
		}
	}
}

func TestTheUsageSnapshotCountsTheBatchesRunning(t *testing.T) {
	provider, _ := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL)) // no worker runs a line
	in := upload(t, g.acme, chatLine("a", "Say hello."))
	for range 2 {
		if _, err := g.acme.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); err != nil {
			t.Fatal(err)
		}
	}
	w := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/admin/usage", nil))
	var u gatewayv1.Usage
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatal(err)
	}
	if len(u.Providers) != 1 || u.Providers[0].BatchesRunning != 2 || u.Providers[0].BatchesQueued != 0 {
		t.Errorf("the usage snapshot's providers %+v; want lab with 2 batches running", u.Providers)
	}
}

func TestABatchsLinesWaitForAValleyInTheLiveCalls(t *testing.T) {
	provider, calls := batchProvider(t)
	g := newBatchGateway(t, settleConfig(provider.URL))
	release := g.live.hold("lab") // a quarter of the provider's 4 calls in flight: its peak
	b, err := g.acme.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: upload(t, g.acme, chatLine("a", "Say hello.")).ID,
		Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	g.runJobs(t)
	poll.Until(t, time.Minute, "the line to be put off", func() bool {
		return testutil.ToFloat64(g.metrics.jobAttempts.WithLabelValues("acme", "deferred")) >= 1
	})
	if calls.Load() != 0 {
		t.Fatalf("the provider got %d calls while its live calls were at their peak; want none", calls.Load())
	}
	release()
	poll.Until(t, time.Minute, "the batch to complete", func() bool {
		b, err = g.acme.Batches.Get(context.Background(), b.ID)
		return err == nil && b.Status == openai.BatchStatusCompleted
	})
	if b.RequestCounts.Completed != 1 || calls.Load() != 1 {
		t.Errorf("counts %+v after %d calls; want the line sent once, in the valley", b.RequestCounts, calls.Load())
	}
}
