package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIClientThroughTheGateway sends a chat completion with the official Go SDK, unmodified
// but for its base URL and key, and reads the gateway's headers from the answer.
func TestOpenAIClientThroughTheGateway(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))
	client := openai.NewClient(option.WithBaseURL(g.api+"/v1"), option.WithAPIKey(keyAlice), option.WithMaxRetries(0))

	var resp *http.Response
	before := time.Now()
	completion, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     "gpt-4o-mini",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
		MaxTokens: openai.Int(100),
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("chat completion through the gateway: %v", err)
	}
	if got := completion.Choices[0].Message.Content; got != "Hello there!" {
		t.Errorf("content = %q; want the provider's answer", got)
	}
	if completion.Usage.TotalTokens != upstreamPrompt+upstreamCompletion {
		t.Errorf("usage = %+v; want the provider's", completion.Usage)
	}
	checkFirstCallHeaders(t, resp.Header, before, time.Now())

	models, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatalf("list models: %v", err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if len(ids) != 2 || ids[0] != "gpt-4o-mini" || ids[1] != "down-model" {
		t.Errorf("models = %v; want the two models of acme's providers", ids)
	}

	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-9",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model through the SDK: %v; want a 404 model_not_found the SDK understands", err)
	}
}
