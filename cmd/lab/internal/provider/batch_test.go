package provider

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// batchInput is n chat lines of gpt-4o-mini, each capped at 100 tokens, and one for a model the
// account does not serve.
func batchInput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"Summarise this page."}]}}`+"\n", i+1)
	}
	b.WriteString(`{"custom_id":"unknown","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}}` + "\n")
	return b.String()
}

// TestBatchAPIWithTheSDK runs batches with OpenAI's Go SDK: a batch is in progress for the
// account's batch delay, then completed with an output file of its lines' answers and an error
// file of the line its endpoint refuses; a batch that would pass the tokens the account may hold
// enqueued for its model fails at once with token_limit_exceeded, and goes once the first is done.
func TestBatchAPIWithTheSDK(t *testing.T) {
	p, srv, clk := start(t, func(o *Options) { o.BatchDelay, o.BatchQueueTokens = time.Minute, 500 })
	c := sdk.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	ctx := t.Context()
	newBatch := func() *sdk.Batch {
		t.Helper()
		f, err := c.Files.New(ctx, sdk.FileNewParams{File: sdk.File(strings.NewReader(batchInput(3)), "in.jsonl", "application/jsonl"), Purpose: sdk.FilePurposeBatch})
		if err != nil {
			t.Fatalf("upload: %v", err)
		}
		b, err := c.Batches.New(ctx, sdk.BatchNewParams{InputFileID: f.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatalf("create a batch: %v", err)
		}
		return b
	}
	first := newBatch()
	if first.Status != sdk.BatchStatusInProgress || first.RequestCounts.Total != 4 {
		t.Fatalf("a new batch: %s of %d lines; want in progress, 4 lines", first.Status, first.RequestCounts.Total)
	}
	refused := newBatch()
	if refused.Status != sdk.BatchStatusFailed || len(refused.Errors.Data) != 1 || refused.Errors.Data[0].Code != "token_limit_exceeded" {
		t.Errorf("a batch past the enqueued tokens: %s, %+v; want failed with token_limit_exceeded", refused.Status, refused.Errors)
	}
	if b, _ := c.Batches.Get(ctx, first.ID); b.Status != sdk.BatchStatusInProgress {
		t.Errorf("before its delay: %s; want in progress", b.Status)
	}
	clk.SetTime(t0.Add(time.Minute))
	done, err := c.Batches.Get(ctx, first.ID)
	if err != nil || done.Status != sdk.BatchStatusCompleted || done.RequestCounts.Completed != 3 || done.RequestCounts.Failed != 1 {
		t.Fatalf("after its delay: %+v, %v; want completed, 3 lines served and 1 failed", done, err)
	}
	for _, line := range readLines(t, c, done.OutputFileID) {
		var body sdk.ChatCompletion
		if err := json.Unmarshal(line.Response.Body, &body); err != nil || line.Response.StatusCode != 200 || body.Usage.CompletionTokens != 100 {
			t.Errorf("output line %s: %d %+v, %v; want 200 and a completion of its 100 tokens", line.CustomID, line.Response.StatusCode, body.Usage, err)
		}
	}
	if errs := readLines(t, c, done.ErrorFileID); len(errs) != 1 || errs[0].CustomID != "unknown" || !strings.Contains(string(errs[0].Response.Body), "model_not_found") {
		t.Errorf("error lines %+v; want the unknown model's model_not_found", errs)
	}
	if st := p.Stats(); st.BatchLines != 3 || st.BatchesRefused != 1 || st.CompletionTokens != 300 {
		t.Errorf("stats: %d batch lines, %d batches refused, %d completion tokens; want 3, 1 and 300", st.BatchLines, st.BatchesRefused, st.CompletionTokens)
	}
	if again := newBatch(); again.Status != sdk.BatchStatusInProgress {
		t.Errorf("a batch once the first is done: %s; want in progress", again.Status)
	}
}

type outputLine struct {
	CustomID string `json:"custom_id"`
	Response struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
}

func readLines(t *testing.T, c sdk.Client, id string) []outputLine {
	t.Helper()
	resp, err := c.Files.Content(t.Context(), id)
	if err != nil {
		t.Fatalf("read file %s: %v", id, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out []outputLine
	for _, raw := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l outputLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("file %s: %q is not JSON", id, raw)
		}
		out = append(out, l)
	}
	return out
}
