package provider

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

const claude = "claude-sonnet-5-5"

// startAnthropic runs an Anthropic account as start runs one of OpenAI's,
// serving claude and claude-haiku-5-5, with edit applied after. It returns
// the provider, its URL and its clock.
func startAnthropic(t *testing.T, edit func(*Options)) (*Server, string, *testingclock.FakePassiveClock) {
	t.Helper()
	p, srv, clk := start(t, func(o *Options) {
		o.API, o.Models = APIAnthropic, []string{claude, "claude-haiku-5-5"}
		if edit != nil {
			edit(o)
		}
	})
	return p, srv.URL, clk
}

// sdkClient is Anthropic's Go SDK for the account at url, with the test's
// key and no retries.
func sdkClient(url string) anthropic.Client {
	return anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(url), option.WithAPIKey(testKey), option.WithMaxRetries(0))
}

// userSays is a request to claude of one user message, text, with up to 40
// tokens in answer.
func userSays(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: claude, MaxTokens: 40,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// TestAnthropicSDK drives an Anthropic account with Anthropic's Go SDK,
// which must read every answer.
func TestAnthropicSDK(t *testing.T) {
	p, url, _ := startAnthropic(t, func(o *Options) { o.AnswerTokens = 30 })
	c := sdkClient(url)
	ctx := t.Context()

	models, err := c.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(models.Data) != 2 || models.Data[0].ID != claude || models.HasMore {
		t.Fatalf("Models.List() = %+v, %v; want the two models", models, err)
	}
	checkParsed(t, "model", models.Data[0])

	count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model: claude, Messages: userSays(summarise).Messages,
	})
	if err != nil || count.InputTokens != 5 {
		t.Errorf("CountTokens() = %+v, %v; want 5 tokens", count, err)
	}

	msg, err := c.Messages.New(ctx, userSays(summarise))
	if err != nil {
		t.Fatalf("New(): %v", err)
	}
	for what, v := range map[string]any{"message": *msg, "usage": msg.Usage, "cache creation": msg.Usage.CacheCreation, "text": msg.Content[0].AsText()} {
		checkParsed(t, what, v)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || openai.TokensOf(msg.Content[0].Text) != 30 ||
		msg.Usage.InputTokens != 5 || msg.Usage.OutputTokens != 30 || msg.Usage.ServiceTier != "standard" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("New() = %+v; want 30 tokens of text for 5 in, ended", msg)
	}

	streamed := accumulate(t, c, withThinking(userSays(summarise)))
	thought := streamed.Content[0].AsThinking()
	if streamed.Content[0].Type != "thinking" || openai.TokensOf(thought.Thinking) != 100 || thought.Signature == "" ||
		openai.TokensOf(streamed.Content[1].Text) != 30 || streamed.Usage.OutputTokens != 130 || streamed.Usage.OutputTokensDetails.ThinkingTokens != 100 ||
		streamed.Usage.InputTokens != 5 || streamed.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("NewStreaming() accumulates %+v; want 100 tokens thought, 30 of text", streamed)
	}

	checkToolCall(t, c)
	checkCachedPrompt(t, c)

	var apiErr *anthropic.Error
	bad := userSays(summarise)
	bad.Model = "claude-nonesuch"
	if _, err := c.Messages.New(ctx, bad); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound ||
		apiErr.Type() != "not_found_error" || !strings.HasPrefix(apiErr.RequestID, "req_") {
		t.Errorf("New(unknown model) error = %v; want a 404 not_found_error with a request id", err)
	}

	// Seven calls served: one, one streamed, three of the tool's, two cached.
	st := p.Stats()
	if st.Accepted != 7 || st.ReasoningTokens != 100 || st.CacheWrite5mPromptTokens != 1250 || st.CachedPromptTokens != 1250 {
		t.Errorf("Stats() = %+v; want 7 calls, 100 tokens thought, 1250 written to the cache and read", st)
	}
}

// summarise is 20 bytes: 5 tokens.
const summarise = "Summarise this page."

// withThinking is params with thinking enabled, within a budget of 1,024
// tokens.
func withThinking(params anthropic.MessageNewParams) anthropic.MessageNewParams {
	params.MaxTokens = 2000
	params.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	return params
}

// accumulate streams params and returns the message its events make.
func accumulate(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) anthropic.Message {
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

// weather is a tool whose schema requires a city.
var weather = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "get_weather", Description: anthropic.String("The weather in a city."),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
}}

// checkToolCall asks for the weather, gets the tool called, streamed too,
// and answers its result.
func checkToolCall(t *testing.T, c anthropic.Client) {
	t.Helper()
	params := userSays("What is the weather in Paris? Use get_weather.")
	params.Tools = []anthropic.ToolUnionParam{weather}
	call, err := c.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatalf("New(with a tool): %v", err)
	}
	use := call.Content[0].AsToolUse()
	checkParsed(t, "tool_use", use)
	if call.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || string(use.Input) != `{"city":"lab"}` || !strings.HasPrefix(use.ID, "toolu_") ||
		call.Usage.OutputTokens != 4 {
		t.Errorf("New(with a tool) = %+v; want get_weather called for city lab, 4 output tokens", call)
	}
	if streamed := accumulate(t, c, params); streamed.StopReason != anthropic.StopReasonToolUse || string(streamed.Content[0].AsToolUse().Input) != `{"city":"lab"}` {
		t.Errorf("NewStreaming(with a tool) accumulates %+v; want the same call", streamed)
	}
	params.Messages = append(params.Messages, call.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "Sunny, 21 C.", false)))
	answer, err := c.Messages.New(t.Context(), params)
	if err != nil || answer.StopReason != anthropic.StopReasonEndTurn || answer.Content[0].Type != "text" {
		t.Errorf("New(with the tool's result) = %+v, %v; want text", answer, err)
	}
}

// checkCachedPrompt sends a system prompt of 1,250 tokens cached for five
// minutes twice: the first call writes it, the second reads it.
func checkCachedPrompt(t *testing.T, c anthropic.Client) {
	t.Helper()
	params := userSays(summarise)
	params.System = []anthropic.TextBlockParam{{Text: strings.Repeat("abcd", 1250), CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	var got [2]anthropic.Usage
	for i := range got {
		msg, err := c.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatalf("New(cached) #%d: %v", i+1, err)
		}
		got[i] = msg.Usage
	}
	type counts struct{ input, written, written5m, read int64 }
	of := func(u anthropic.Usage) counts {
		return counts{u.InputTokens, u.CacheCreationInputTokens, u.CacheCreation.Ephemeral5mInputTokens, u.CacheReadInputTokens}
	}
	if diff := cmp.Diff([]counts{of(got[0]), of(got[1])}, []counts{{5, 1250, 1250, 0}, {5, 0, 0, 1250}}, cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("usage of the two calls mismatch (-got +want):\n%s", diff)
	}
}
