package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// fuzzEndpoints maps the fuzzer's endpoint byte to an endpoint.
var fuzzEndpoints = []estimate.Endpoint{estimate.Chat, estimate.Completions, estimate.Embeddings, estimate.Responses, estimate.Messages}

// FuzzWhatTheProviderReads checks that what the gateway checks is what the provider gets: for
// any body the gateway accepts, in OpenAI's API or Anthropic's Messages API, the bytes it forwards give the model, n, cap, stream and content
// that its estimate used, read as a provider in Python or JavaScript reads them (keys matched
// with case, the last of a repeat kept) and, for the fields, as one in Go reads them (keys
// matched without case).
func FuzzWhatTheProviderReads(f *testing.F) {
	seeds := []struct {
		endpoint estimate.Endpoint
		body     string
	}{
		{estimate.Chat, settleBody},
		{estimate.Chat, `{"model":"alias-m","n":2,"stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","name":"a","content":[{"type":"text","text":"Hi"},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`},
		{estimate.Chat, `{"model":"m","max_completion_tokens":9,"max_tokens":3,"messages":[{"role":"user","content":"x","reasoning_content":"y"}],"x-vendor":{"a":1}}`},
		{estimate.Chat, `{"model":"tgi","max_completion_tokens":9,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"m","stream":true,"stream_options":{"include_usage":false,"Include_Usage":true},"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"o1-pro","Model":"m","messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"m","max_tokens":5000,"Max_Tokens":1,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"m","n":50,"N":1,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"m","MAX_TOKENS":1,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"m","stream":true,"Stream":false,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"model":"m","max_output_tokens":1,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Chat, `{"mod\u0065l":"m","messages":[{"role":"user","content":"a","Content":"b"}]}`},
		{estimate.Completions, `{"model":"m","prompt":["a","b"],"n":2,"best_of":3,"max_tokens":4}`},
		{estimate.Completions, `{"model":"m","prompt":"a","max_completion_tokens":4}`},
		{estimate.Embeddings, `{"model":"m","input":["a","b"]}`},
		{estimate.Responses, `{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]}],"max_output_tokens":7}`},
		{estimate.Responses, `{"model":"m","input":"Hi","max_tokens":7}`},
		{estimate.Messages, `{"model":"claude-m","max_tokens":9,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"tool_result","tool_use_id":"t","content":"42"}]}]}`},
		{estimate.Messages, `{"model":"claude-m","max_tokens":9,"stream":true,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Hi"}]}`},
		{estimate.Messages, `{"model":"claude-m","max_tokens":1,"Max_Tokens":9000,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Messages, `{"model":"claude-m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a","Text":"b"}]}]}`},
		{estimate.Messages, `{"model":"claude-m","max_tokens":1,"stream":false,"Stream":true,"n":5,"messages":[{"role":"user","content":"x"}]}`},
		{estimate.Messages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`},
	}
	for _, s := range seeds {
		f.Add(byte(slices.Index(fuzzEndpoints, s.endpoint)), []byte(s.body))
	}
	cfg := settleConfig("http://127.0.0.1:1")
	cfg.Providers[0].Models[0].Aliases = []string{"alias-m"}
	// tgi's provider reads max_tokens only, as TGI does.
	cfg.Providers[0].Models = append(cfg.Providers[0].Models, gatewayv1.Model{Name: "tgi", DefaultMaxTokens: 256, MaxTokensParam: gatewayv1.MaxTokensParamTokens, ContextWindow: 1 << 20})
	// claude's provider speaks Anthropic's Messages API.
	claude := cfg.Providers[0]
	claude.Name, claude.API, claude.AnthropicVersion = "claude", gatewayv1.APIAnthropic, gatewayv1.DefaultAnthropicVersion
	claude.Models = []gatewayv1.Model{{Name: "claude-m", DefaultMaxTokens: 256, MaxTokensParam: gatewayv1.MaxTokensParamCompletion, ContextWindow: 1 << 20}}
	cfg.Providers = append(cfg.Providers, claude)
	cfg.Tenants[0].Providers = append(cfg.Tenants[0].Providers, "claude")
	g := newSettleGatewayFrom(f, cfg)
	p := g.policy
	caller := p.Caller(settleKey)
	f.Fuzz(func(t *testing.T, endpointByte byte, body []byte) {
		endpoint := fuzzEndpoints[int(endpointByte)%len(fuzzEndpoints)]
		c, apiErr := g.newCall(t.Context(), p, caller, endpoint, body)
		if apiErr != nil {
			return
		}
		caps := chatCaps(c)
		checkReading(t, p, c, pythonReading(t, endpoint, c.body.bytes(), caps))
		checkFields(t, p, c, goReading(t, endpoint, c.body.bytes(), caps))
	})
}

// reading is what a provider reads of a body: the fields that decide its cost and the texts it
// renders as content.
type reading struct {
	model  string
	n, cap int64
	stream bool
	// usage is stream_options.include_usage: whether a stream ends with the usage the gateway
	// settles from.
	usage bool
	texts []string
}

// checkReading fails unless the provider's reading r of the call's body is the call's own.
func checkReading(t *testing.T, p *policy.Policy, c *call, r reading) {
	t.Helper()
	checkFields(t, p, c, r)
	if !isSubsequence(r.texts, c.request.Prompt.Texts) {
		t.Errorf("the provider reads content %q; the estimate counted %q", r.texts, c.request.Prompt.Texts)
	}
}

// checkFields fails unless the provider's reading r gives the model, n, cap and stream that the
// call's estimate used.
func checkFields(t *testing.T, p *policy.Policy, c *call, r reading) {
	t.Helper()
	if route := c.route; r.model != upstreamModel(route, c.request.Model) || p.Routes(r.model)[0] != route {
		t.Errorf("the provider reads model %q; the gateway routed %q to %q", r.model, c.request.Model, c.route.Model.Name)
	}
	if c.endpoint == estimate.Embeddings { // no stream, n or cap
		return
	}
	if r.stream != c.request.Stream {
		t.Errorf("the provider reads stream %v; the gateway %v", r.stream, c.request.Stream)
	}
	if r.stream && (c.endpoint == estimate.Chat || c.endpoint == estimate.Completions) && !r.usage {
		t.Errorf("the provider reads a stream without its usage; the gateway settles from it")
	}
	if r.n != c.request.N {
		t.Errorf("the provider generates %d completions; the estimate counted %d", r.n, c.request.N)
	}
	if want := mulSat(r.cap, r.n); c.estimate.CompletionTokens != want {
		t.Errorf("the provider writes at most %d × %d tokens; the estimate counted %d", r.cap, r.n, c.estimate.CompletionTokens)
	}
}

// chatCaps are the fields a chat's provider reads its cap from, the first set wins: max_tokens
// alone for an engine such as TGI, else max_completion_tokens before max_tokens, as OpenAI and
// vLLM read them.
func chatCaps(c *call) []string {
	if c.route.Model.MaxTokensParam == gatewayv1.MaxTokensParamTokens {
		return []string{estimate.MaxTokens}
	}
	return []string{estimate.MaxCompletionTokens, estimate.MaxTokens}
}

// pythonReading reads a body as Python's json module and JavaScript's JSON.parse read it: keys
// matched with case, the last of a repeat kept.
func pythonReading(t *testing.T, endpoint estimate.Endpoint, body []byte, chatCaps []string) reading {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("the forwarded body does not decode: %v", err)
	}
	r := reading{n: 1}
	r.model, _ = m["model"].(string)
	r.stream, _ = m["stream"].(bool)
	if opts, ok := m["stream_options"].(map[string]any); ok {
		r.usage, _ = opts["include_usage"].(bool)
	}
	if n, ok := integer(m["n"]); ok {
		r.n = n
	}
	switch endpoint {
	case estimate.Chat:
		r.cap = firstInteger(m, chatCaps...)
		for _, msg := range objects(m["messages"]) {
			r.texts = append(r.texts, contentTexts(msg["content"], "text")...)
		}
	case estimate.Completions:
		r.cap = firstInteger(m, estimate.MaxTokens)
		r.texts = textsOf(m["prompt"])
		if bestOf, ok := integer(m["best_of"]); ok {
			r.n = max(r.n, bestOf)
		}
		if prompts, ok := m["prompt"].([]any); ok && len(prompts) > 0 {
			if _, ids := prompts[0].(json.Number); !ids {
				r.n = mulSat(r.n, int64(len(prompts)))
			}
		}
	case estimate.Embeddings:
		r.texts = textsOf(m["input"])
	case estimate.Responses:
		r.n, r.cap = 1, firstInteger(m, estimate.MaxOutputTokens)
		r.texts = responseTexts(m["instructions"])
		r.texts = append(r.texts, responseTexts(m["input"])...)
	case estimate.Messages:
		r.n, r.cap = 1, firstInteger(m, estimate.MaxTokens)
		r.texts = contentTexts(m["system"], "text")
		for _, msg := range objects(m["messages"]) {
			r.texts = append(r.texts, contentTexts(msg["content"], "text")...)
		}
	}
	return r
}

// goReading reads a body's fields as a provider written in Go reads them with encoding/json:
// keys matched without case, the last of a repeat kept.
func goReading(t *testing.T, endpoint estimate.Endpoint, body []byte, chatCaps []string) reading {
	t.Helper()
	var b struct {
		Model               string
		Stream              bool
		N                   *int64
		BestOf              *int64 `json:"best_of"`
		MaxTokens           *int64 `json:"max_tokens"`
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
		MaxOutputTokens     *int64 `json:"max_output_tokens"`
		Prompt              json.RawMessage
		StreamOptions       struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		var typ *json.UnmarshalTypeError
		if !errors.As(err, &typ) {
			t.Fatalf("the forwarded body does not decode: %v", err)
		}
	}
	r := reading{model: b.Model, stream: b.Stream, usage: b.StreamOptions.IncludeUsage, n: deref(b.N, 1)}
	switch endpoint {
	case estimate.Chat:
		caps := map[string]*int64{estimate.MaxCompletionTokens: b.MaxCompletionTokens, estimate.MaxTokens: b.MaxTokens}
		for _, f := range slices.Backward(chatCaps) {
			r.cap = deref(caps[f], r.cap)
		}
	case estimate.Completions:
		r.cap, r.n = deref(b.MaxTokens, 0), max(r.n, deref(b.BestOf, 1))
		var prompts []json.RawMessage
		if json.Unmarshal(b.Prompt, &prompts) == nil && len(prompts) > 0 && prompts[0][0] != '-' && (prompts[0][0] < '0' || prompts[0][0] > '9') {
			r.n = mulSat(r.n, int64(len(prompts)))
		}
	case estimate.Responses:
		r.n, r.cap = 1, deref(b.MaxOutputTokens, 0)
	case estimate.Messages:
		r.n, r.cap = 1, deref(b.MaxTokens, 0)
	}
	return r
}

// contentTexts are the texts of a chat content: a string, or its parts of type text.
func contentTexts(content any, textType string) []string {
	if s, ok := content.(string); ok {
		return nonEmpty([]string{s})
	}
	var texts []string
	for _, part := range objects(content) {
		if part["type"] == textType {
			if s, _ := part["text"].(string); s != "" {
				texts = append(texts, s)
			}
		}
	}
	return nonEmpty(texts)
}

// responseTexts are the texts of a Responses input or instructions: a string, or the content of
// its message items (an item without a role is no message, and counts as its JSON).
func responseTexts(input any) []string {
	if s, ok := input.(string); ok {
		return nonEmpty([]string{s})
	}
	var texts []string
	for _, item := range objects(input) {
		typ, _ := item["type"].(string)
		if role, _ := item["role"].(string); role == "" || typ != "" && typ != "message" {
			continue
		}
		texts = append(texts, contentTexts(item["content"], "input_text")...)
		texts = append(texts, contentTexts(item["content"], "output_text")...)
	}
	return nonEmpty(texts)
}

// textsOf are a prompt's or an input's texts: a string or an array of them.
func textsOf(v any) []string {
	if s, ok := v.(string); ok {
		return nonEmpty([]string{s})
	}
	var texts []string
	items, _ := v.([]any)
	for _, item := range items {
		if s, ok := item.(string); ok {
			texts = append(texts, s)
		}
	}
	return nonEmpty(texts)
}

func nonEmpty(texts []string) []string {
	return slices.DeleteFunc(texts, func(s string) bool { return s == "" })
}

func objects(v any) []map[string]any {
	items, _ := v.([]any)
	var out []map[string]any
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// firstInteger is the first of the fields m sets to an integer, or 0.
func firstInteger(m map[string]any, fields ...string) int64 {
	for _, f := range fields {
		if n, ok := integer(m[f]); ok {
			return n
		}
	}
	return 0
}

func deref(v *int64, otherwise int64) int64 {
	if v == nil {
		return otherwise
	}
	return *v
}

// isSubsequence reports whether want appears in got, in order, perhaps with more between.
func isSubsequence(want []string, got [][]byte) bool {
	for _, w := range want {
		i := slices.IndexFunc(got, func(g []byte) bool { return string(g) == w })
		if i < 0 {
			return false
		}
		got = got[i+1:]
	}
	return true
}

func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
