package provider

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// chatAnswer is the part of a chat answer the billing tests read.
type chatAnswer struct {
	ServiceTier string `json:"service_tier"`
	Choices     []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage openai.Usage `json:"usage"`
}

// postChat posts body to /v1/chat/completions, wants 200 and returns the
// answer.
func postChat(t *testing.T, url, body string) chatAnswer {
	t.Helper()
	resp, data := do(t, http.MethodPost, url+"/v1/chat/completions", testKey, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/chat/completions: %d %s; want 200", resp.StatusCode, data)
	}
	return decode[chatAnswer](t, data)
}

// chatOf is the body of a chat to model, with fields (JSON members, or
// empty) and one user message for each of contents.
func chatOf(t *testing.T, model, fields string, contents ...string) string {
	t.Helper()
	msgs := make([]map[string]string, len(contents))
	for i, c := range contents {
		msgs[i] = map[string]string{"role": "user", "content": c}
	}
	data, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if fields != "" {
		fields += ","
	}
	return `{"model":"` + model + `",` + fields + `"messages":` + string(data) + `}`
}

// turns is a transcript of n turns of 2,000 tokens each.
func turns(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = transcript(i*1000, 2000)
	}
	return out
}

// micros is what tokens cost at the reference account's prices: $3 a
// million uncached, $0.30 cached and $3 out, rounded up.
func micros(uncached, cached, output int64) int64 {
	return (uncached*3_000_000 + cached*300_000 + output*3_000_000 + 999_999) / 1_000_000
}

func TestChatPromptCaching(t *testing.T) {
	p, srv, clk := start(t, nil)
	history := turns(10) // 20,000 tokens
	steps := []struct {
		after    time.Duration // moves the clock before the call
		contents []string
		prompt   int64
		want     int64 // cached
	}{
		{contents: history, prompt: 20_000, want: 0},
		{after: time.Minute, contents: append(history, transcript(100_000, 100)), prompt: 20_100, want: 19_968},
		{after: 5*time.Minute - time.Second, contents: append(history, transcript(100_000, 400)), prompt: 20_400, want: 20_096},
		{after: 5 * time.Minute, contents: append(history, transcript(100_000, 400)), prompt: 20_400, want: 0}, // expired
		{contents: history[:1], prompt: 2000, want: 1920},                                                      // seen just before
		{contents: []string{transcript(0, 1000)}, prompt: 1000, want: 0},                                       // under 1,024 tokens
	}
	var wantCached, wantMicros int64
	for i, st := range steps {
		clk.SetTime(clk.Now().Add(st.after))
		got := postChat(t, srv.URL, chatOf(t, "gpt-4o", `"max_tokens":40`, st.contents...)).Usage
		want := openai.Usage{PromptTokens: st.prompt, CompletionTokens: 40, TotalTokens: st.prompt + 40,
			PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: st.want}, CompletionTokensDetails: &openai.CompletionTokensDetails{}}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("step %d: usage mismatch (-got +want):\n%s", i, diff)
		}
		wantCached += st.want
		wantMicros += micros(st.prompt-st.want, st.want, 40)
	}
	st := p.Stats()
	if st.CachedPromptTokens != wantCached || st.MicroDollars != wantMicros || st.Tiers.Default.CachedInputTokens != wantCached {
		t.Errorf("Stats() cached %d (default tier %d), %d micro-dollars; want %d cached, %d micro-dollars",
			st.CachedPromptTokens, st.Tiers.Default.CachedInputTokens, st.MicroDollars, wantCached, wantMicros)
	}
}

func TestCacheIsByModel(t *testing.T) {
	_, srv, _ := start(t, nil)
	body := func(model string) string { return chatOf(t, model, `"max_tokens":16`, turns(1)...) }
	postChat(t, srv.URL, body("gpt-4o"))
	if got := postChat(t, srv.URL, body("gpt-4o-mini")).Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Errorf("another model's prompt: %d cached tokens; want 0", got)
	}
	if got := postChat(t, srv.URL, body("gpt-4o")).Usage.PromptTokensDetails.CachedTokens; got != 1920 {
		t.Errorf("the same model's prompt: %d cached tokens; want 1920", got)
	}
}

// responseUsage is a Response's usage with its details.
type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// responseBilled is the part of a Response object the billing tests read.
type responseBilled struct {
	ID          string         `json:"id"`
	ServiceTier string         `json:"service_tier"`
	Usage       *responseUsage `json:"usage"`
	Output      []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

func postResponse(t *testing.T, url, body string) responseBilled {
	t.Helper()
	status, data := call(t, http.MethodPost, url+"/v1/responses", body)
	if status != http.StatusOK {
		t.Fatalf("POST /v1/responses %s: %d %s; want 200", body, status, data)
	}
	return decode[responseBilled](t, data)
}

func TestResponseChainIsCached(t *testing.T) {
	_, srv, _ := start(t, nil)
	first := postResponse(t, srv.URL, `{"model":"gpt-4o","max_output_tokens":40,"input":"`+transcript(0, 5000)+`"}`)
	if got := first.Usage.InputTokensDetails.CachedTokens; got != 0 {
		t.Errorf("first response: %d cached tokens; want 0", got)
	}
	// Its 5,000 tokens and its 40 of output lead the next one's input.
	next := postResponse(t, srv.URL, `{"model":"gpt-4o","max_output_tokens":40,"previous_response_id":"`+first.ID+`","input":"Go on."}`)
	if got, want := *next.Usage, (responseUsage{InputTokens: 5000 + 40 + 2, OutputTokens: 40}); got.InputTokens != want.InputTokens ||
		got.InputTokensDetails.CachedTokens != 1024+31*128 {
		t.Errorf("continued response: %d input tokens, %d cached; want %d and %d", got.InputTokens, got.InputTokensDetails.CachedTokens, want.InputTokens, 1024+31*128)
	}
}

func TestReasoningAndAudio(t *testing.T) {
	const audioPart = `{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}`
	tests := []struct {
		name       string
		body       string
		wantUsage  openai.Usage
		wantText   int64
		wantFinish string
	}{{
		name:       "a reasoning model reasons within the cap",
		body:       `{"model":"o3","max_completion_tokens":300,"messages":[{"role":"user","content":"hi"}]}`,
		wantUsage:  usageOf(1, 0, 0, 300, 100, 0),
		wantText:   200,
		wantFinish: "length",
	}, {
		name:       "gpt-5 reasons in the default completion",
		body:       `{"model":"gpt-5-mini","messages":[{"role":"user","content":"hi"}]}`,
		wantUsage:  usageOf(1, 0, 0, 200, 100, 0),
		wantText:   100,
		wantFinish: "stop",
	}, {
		name:       "an answer in audio is half audio",
		body:       `{"model":"gpt-4o","modalities":["text","audio"],"max_tokens":101,"messages":[{"role":"user","content":"hi"}]}`,
		wantUsage:  usageOf(1, 0, 0, 101, 0, 50),
		wantText:   51,
		wantFinish: "length",
	}, {
		name:       "audio parts are audio prompt tokens",
		body:       `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},` + audioPart + `,` + audioPart + `]}]}`,
		wantUsage:  usageOf(1+2*500, 0, 2*500, 10, 0, 0),
		wantText:   10,
		wantFinish: "length",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, _ := start(t, func(o *Options) { o.Models = append(o.Models, "o3", "gpt-5-mini") })
			got := postChat(t, srv.URL, tc.body)
			if diff := cmp.Diff(got.Usage, tc.wantUsage); diff != "" {
				t.Errorf("usage mismatch (-got +want):\n%s", diff)
			}
			if n := openai.TokensOf(got.Choices[0].Message.Content); n != tc.wantText || got.Choices[0].FinishReason != tc.wantFinish {
				t.Errorf("answer of %d tokens of text, finished for %q; want %d, %q", n, got.Choices[0].FinishReason, tc.wantText, tc.wantFinish)
			}
			u, st := tc.wantUsage, p.Stats()
			gotStats := []int64{st.PromptTokens, st.AudioPromptTokens, st.CompletionTokens, st.ReasoningTokens, st.AudioCompletionTokens}
			wantStats := []int64{u.PromptTokens, u.PromptTokensDetails.AudioTokens, u.CompletionTokens, u.CompletionTokensDetails.ReasoningTokens, u.CompletionTokensDetails.AudioTokens}
			if diff := cmp.Diff(gotStats, wantStats); diff != "" {
				t.Errorf("Stats() prompt, audio prompt, completion, reasoning and audio completion tokens mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// usageOf is a chat's usage with its details.
func usageOf(prompt, cached, audioIn, completion, reasoning, audioOut int64) openai.Usage {
	return openai.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails:     &openai.PromptTokensDetails{CachedTokens: cached, AudioTokens: audioIn},
		CompletionTokensDetails: &openai.CompletionTokensDetails{ReasoningTokens: reasoning, AudioTokens: audioOut}}
}

func TestStreamedUsageHasItsDetails(t *testing.T) {
	_, srv, _ := start(t, func(o *Options) { o.Models = append(o.Models, "o3") })
	body := `{"model":"o3","max_completion_tokens":150,"stream":true,"stream_options":{"include_usage":true},"service_tier":"flex","messages":[{"role":"user","content":"hi"}]}`
	resp, data := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, body)
	usage, text := read(t, resp.Header.Get("Content-Type"), data)
	want := usageOf(1, 0, 0, 150, 100, 0)
	if diff := cmp.Diff(usage, &want); diff != "" {
		t.Errorf("usage chunk mismatch (-got +want):\n%s", diff)
	}
	if n := openai.TokensOf(text); n != 50 {
		t.Errorf("streamed %d tokens of text; want 50", n)
	}
	for ev := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n\n"), "\n\n") {
		if ev != "data: [DONE]" && !strings.Contains(ev, `"service_tier":"flex"`) {
			t.Errorf("chunk %s does not say it was served at flex", ev)
		}
	}
}

func TestResponseReasons(t *testing.T) {
	p, srv, _ := start(t, func(o *Options) { o.Models = append(o.Models, "o4-mini") })
	got := postResponse(t, srv.URL, `{"model":"o4-mini","max_output_tokens":300,"input":"hi"}`)
	if u := got.Usage; u.OutputTokens != 300 || u.OutputTokensDetails.ReasoningTokens != 100 || openai.TokensOf(got.Output[0].Content[0].Text) != 200 {
		t.Errorf("usage %+v, text %q; want 300 output tokens, 100 of them reasoning, and 200 of text", u, got.Output[0].Content[0].Text)
	}
	if st := p.Stats(); st.ReasoningTokens != 100 || st.Responses.Foreground.ReasoningTokens != 100 {
		t.Errorf("Stats() reasoning %d, in responses %d; want 100 and 100", st.ReasoningTokens, st.Responses.Foreground.ReasoningTokens)
	}
}

func TestServiceTiers(t *testing.T) {
	p, srv, _ := start(t, nil)
	// 5 prompt and 40 completion tokens: 135 micro-dollars at the default tier.
	const page = `"max_tokens":40,"messages":[{"role":"user","content":"Summarise this page."}]`
	tests := []struct {
		tier, want string
		micros     int64
	}{
		{tier: `"priority"`, want: "priority", micros: 270},
		{tier: `"flex"`, want: "flex", micros: 68}, // ⌈67.5⌉
		{tier: `"auto"`, want: "default", micros: 135},
		{tier: `null`, want: "default", micros: 135},
	}
	for _, tc := range tests {
		before := p.Stats().MicroDollars
		got := postChat(t, srv.URL, `{"model":"gpt-4o","service_tier":`+tc.tier+`,`+page+`}`)
		if spent := p.Stats().MicroDollars - before; got.ServiceTier != tc.want || spent != tc.micros {
			t.Errorf("service_tier %s: served at %q for %d micro-dollars; want %q, %d", tc.tier, got.ServiceTier, spent, tc.want, tc.micros)
		}
	}
	r := postResponse(t, srv.URL, `{"model":"gpt-4o","service_tier":"flex","max_output_tokens":40,"input":"Summarise this page."}`)
	if r.ServiceTier != "flex" {
		t.Errorf("response served at %q; want flex", r.ServiceTier)
	}
	want := TierBills{
		Default:  Bill{InputTokens: 10, OutputTokens: 80, MicroDollars: 270},
		Priority: Bill{InputTokens: 5, OutputTokens: 40, MicroDollars: 270},
		Flex:     Bill{InputTokens: 10, OutputTokens: 80, MicroDollars: 136},
	}
	if diff := cmp.Diff(p.Stats().Tiers, want); diff != "" {
		t.Errorf("Stats().Tiers mismatch (-got +want):\n%s", diff)
	}
	_, metrics := do(t, http.MethodGet, srv.URL+"/metrics", "", "")
	got := samples(t, metrics)
	for series, want := range map[string]float64{
		`lab_provider_tier_spend_micro_dollars_total{tier="flex"}`:         136,
		`lab_provider_tier_tokens_total{kind="prompt",tier="priority"}`:    5,
		`lab_provider_tier_tokens_total{kind="completion",tier="default"}`: 80,
		`lab_provider_spend_micro_dollars_total`:                           676,
	} {
		if got[series] != want {
			t.Errorf("%s = %v; want %v", series, got[series], want)
		}
	}
}

func TestTheWorkedExample(t *testing.T) {
	p, srv, clk := start(t, func(o *Options) { o.Models = append(o.Models, "o3") })
	postChat(t, srv.URL, chatOf(t, "o3", `"service_tier":"priority"`, transcript(0, 1200)))
	clk.SetTime(t0.Add(time.Minute))
	before := p.Stats().MicroDollars
	got := postChat(t, srv.URL, `{"model":"o3","service_tier":"priority","modalities":["text","audio"],"max_completion_tokens":300,`+
		`"messages":[{"role":"user","content":[{"type":"text","text":"`+transcript(0, 2000)+`"},`+
		`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}`)
	if diff := cmp.Diff(got.Usage, usageOf(2500, 1152, 500, 300, 100, 100)); diff != "" {
		t.Errorf("usage mismatch (-got +want):\n%s", diff)
	}
	if spent := p.Stats().MicroDollars - before; spent != 62_980 || got.ServiceTier != "priority" {
		t.Errorf("billed %d micro-dollars at %s; want 62,980 at priority", spent, got.ServiceTier)
	}
}
