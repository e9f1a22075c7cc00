package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// The usage every answer of the SDK provider reports.
const (
	sdkInputTokens  = 12
	sdkOutputTokens = 7
)

// sdkProvider answers chat completions, responses and embeddings as OpenAI does, streamed or
// not, each with its usage, and counts the calls that reach it by path.
type sdkProvider struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newSDKProvider(t *testing.T) *sdkProvider {
	p := &sdkProvider{calls: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *sdkProvider) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[path]
}

func (p *sdkProvider) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	p.mu.Lock()
	p.calls[r.URL.Path]++
	p.mu.Unlock()
	chatUsage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, sdkInputTokens, sdkOutputTokens, sdkInputTokens+sdkOutputTokens)
	response := fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello there!","annotations":[]}]}],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
		body.Model, sdkInputTokens, sdkOutputTokens, sdkInputTokens+sdkOutputTokens)
	switch {
	case r.URL.Path == "/v1/chat/completions" && body.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, word := range []string{"Hello", " there", "!"} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", body.Model, word)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", body.Model, chatUsage)
	case r.URL.Path == "/v1/chat/completions":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello there!"}}],"usage":%s}`, body.Model, chatUsage)
	case r.URL.Path == "/v1/responses" && body.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello there!\",\"sequence_number\":1}\n\n")
		fmt.Fprintf(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":%s}\n\n", response)
	case r.URL.Path == "/v1/responses":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, response)
	case r.URL.Path == "/v1/embeddings":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","model":%q,"data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, body.Model, sdkInputTokens, sdkInputTokens)
	default:
		http.NotFound(w, r)
	}
}

// sdkConfig is a gateway in front of the SDK provider, whose tokens per minute no call of 10
// million tokens can fit: acme may call as it likes; burst may send one request a second,
// refused at once past it.
func sdkConfig(t *testing.T, providerURL string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: stub
    baseURL: %s/v1
    models:
      - {name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 50}
      - {name: text-embedding-3-small, encoding: cl100k_base}
    tokensPerMinute: 1000000
    prices: {inputPerMillion: "1.00", outputPerMillion: "2.00"}
    retry: {maxAttempts: 1}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [stub]
  - name: burst
    keys: [{sha256: %s, user: bob}]
    providers: [stub]
    perUser:
      - {dimension: requests, amount: 1, per: second, onLimit: Reject}
  - name: daily
    keys: [{sha256: %s, user: dave}]
    providers: [stub]
    perUser:
      - {dimension: requests, amount: 1, per: day, onLimit: Reject}
`, providerURL, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyBob), gatewayv1.HashKey(keyDave))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGoSDKThroughTheGateway runs the official Go SDK, unmodified but for its base URL and key,
// through the gateway: a chat completion, a stream read to its final usage, a response plain and
// streamed, an embedding, and a 429 that the SDK retries after the gateway's Retry-After. The
// provider counts what reached it, and the tenant's usage what was charged.
func TestGoSDKThroughTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary; skipped with -short")
	}
	p := newSDKProvider(t)
	g := startGateway(t, sdkConfig(t, p.URL))
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(g.api+"/v1"), option.WithAPIKey(keyAlice), option.WithMaxRetries(0))

	completion, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	if err != nil || completion.Choices[0].Message.Content != "Hello there!" || completion.Usage.TotalTokens != sdkInputTokens+sdkOutputTokens {
		t.Errorf("chat completion: %+v, %v; want the provider's answer and usage", completion, err)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "Hello there!" || acc.Usage.TotalTokens != sdkInputTokens+sdkOutputTokens {
		t.Errorf("chat stream: %+v, usage %+v, %v; want the provider's text and its final usage", acc.Choices, acc.Usage, err)
	}

	params := responses.ResponseNewParams{Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		MaxOutputTokens: openai.Int(50)}
	response, err := client.Responses.New(ctx, params)
	if err != nil || response.OutputText() != "Hello there!" || response.Usage.TotalTokens != sdkInputTokens+sdkOutputTokens {
		t.Errorf("response: %+v, %v; want the provider's answer and usage", response, err)
	}
	events := client.Responses.NewStreaming(ctx, params)
	var completed responses.Response
	for events.Next() {
		if e := events.Current(); e.Type == "response.completed" {
			completed = e.AsResponseCompleted().Response
		}
	}
	if err := events.Err(); err != nil || completed.Usage.TotalTokens != sdkInputTokens+sdkOutputTokens {
		t.Errorf("response stream: completed %+v, %v; want response.completed with the provider's usage", completed.Usage, err)
	}

	embedding, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("The food was delicious.")},
	})
	if err != nil || len(embedding.Data) != 1 || embedding.Usage.PromptTokens != sdkInputTokens {
		t.Errorf("embedding: %+v, %v; want the provider's", embedding, err)
	}

	for path, want := range map[string]int{"/v1/chat/completions": 2, "/v1/responses": 2, "/v1/embeddings": 1} {
		if got := p.count(path); got != want {
			t.Errorf("the provider got %d calls at %s; want %d", got, path, want)
		}
	}
	want := int64(4*(sdkInputTokens+sdkOutputTokens) + sdkInputTokens)
	for _, u := range g.usage(t).Tenants {
		if u.Name == "acme" && u.TokensLastMinute != want {
			t.Errorf("acme was charged %d tokens; want %d, what the provider reported", u.TokensLastMinute, want)
		}
	}

	t.Run("a 429 retried after Retry-After", func(t *testing.T) {
		var attempts sync.Map // status → count
		counting := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if err == nil {
				n, _ := attempts.LoadOrStore(resp.StatusCode, new(int))
				*n.(*int)++
			}
			return resp, err
		})
		burst := openai.NewClient(option.WithBaseURL(g.api+"/v1"), option.WithAPIKey(keyBob), option.WithMaxRetries(2), counting)
		before := p.count("/v1/chat/completions")
		for range 2 {
			if _, err := burst.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			}); err != nil {
				t.Fatalf("a call the SDK retries: %v", err)
			}
		}
		refused, ok := attempts.Load(http.StatusTooManyRequests)
		if !ok || *refused.(*int) < 1 {
			t.Errorf("no 429 reached the SDK; the second call within a second should have been refused")
		}
		if got := p.count("/v1/chat/completions") - before; got != 2 {
			t.Errorf("the provider got %d calls; want 2: a refused call never reaches it", got)
		}
	})
}

// nodeSDKResult is what testdata/node-sdk.js prints.
type nodeSDKResult struct {
	Chat, Stream, Response struct {
		Content string
		Total   int
	}
	ResponseStream struct{ Total int }
	Embedding      struct{ Count, Prompt int }
	Retried        []int
	TooLarge       struct {
		Status                  int
		Type, Code, Param, Name string
	}
	TooLargeAnswers []int
	Spent           struct {
		Status           int
		Type, Code, Name string
	}
	SpentAnswers []int
}

// TestNodeSDKThroughTheGateway runs the official openai npm package through the gateway: the
// calls of TestGoSDKThroughTheGateway, a request that can never fit, which the SDK must raise at
// once as a bad request rather than retry as a rate limit, and a call past a day's quota, which
// it must raise at once rather than sleep until midnight. It needs node and npm, and
// installs the package once under bin/ (hack/node-sdk.sh).
func TestNodeSDKThroughTheGateway(t *testing.T) {
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
	p := newSDKProvider(t)
	g := startGateway(t, sdkConfig(t, p.URL))
	cmd := exec.Command("node", "testdata/node-sdk.js", g.api+"/v1", keyAlice, keyBob, keyDave)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.TrimSpace(string(modules)))
	cmd.Stderr = os.Stderr
	printed, err := cmd.Output()
	if err != nil {
		t.Fatalf("node-sdk.js: %v", err)
	}
	var got nodeSDKResult
	if err := json.Unmarshal(printed, &got); err != nil {
		t.Fatalf("node-sdk.js printed %s: %v", printed, err)
	}
	total := sdkInputTokens + sdkOutputTokens
	for name, answer := range map[string]struct {
		Content string
		Total   int
	}{"chat": got.Chat, "stream": got.Stream, "response": got.Response} {
		if answer.Content != "Hello there!" || answer.Total != total {
			t.Errorf("%s: %+v; want the provider's text and %d tokens", name, answer, total)
		}
	}
	if got.ResponseStream.Total != total || got.Embedding.Count != 1 || got.Embedding.Prompt != sdkInputTokens {
		t.Errorf("response stream %+v, embedding %+v; want the provider's usage", got.ResponseStream, got.Embedding)
	}
	if !slices.Contains(got.Retried, http.StatusTooManyRequests) || got.Retried[len(got.Retried)-1] != http.StatusOK {
		t.Errorf("the retrying client saw %v; want a 429 it retried to a 200", got.Retried)
	}
	if got.TooLarge.Status != http.StatusBadRequest || got.TooLarge.Type != "invalid_request_error" || got.TooLarge.Param != "max_tokens" ||
		got.TooLarge.Name != "BadRequestError" || !slices.Equal(got.TooLargeAnswers, []int{http.StatusBadRequest}) {
		t.Errorf("a request that can never fit: %+v after answers %v; want one 400 invalid_request_error on max_tokens, raised as BadRequestError, not retried",
			got.TooLarge, got.TooLargeAnswers)
	}
	if got.Spent.Status != http.StatusTooManyRequests || got.Spent.Code != "insufficient_quota" || got.Spent.Name != "RateLimitError" ||
		!slices.Equal(got.SpentAnswers, []int{http.StatusOK, http.StatusTooManyRequests}) {
		t.Errorf("a day's quota spent: %+v after answers %v; want one 429 insufficient_quota, raised at once, not retried until the reset",
			got.Spent, got.SpentAnswers)
	}
	for path, want := range map[string]int{"/v1/chat/completions": 5, "/v1/responses": 2, "/v1/embeddings": 1} {
		if got := p.count(path); got != want {
			t.Errorf("the provider got %d calls at %s; want %d", got, path, want)
		}
	}
}
