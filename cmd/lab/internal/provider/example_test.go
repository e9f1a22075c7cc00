package provider_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

func Example() {
	opts := provider.DefaultOptions() // the reference account
	opts.APIKey = "sk-lab"
	opts.Latency, opts.LatencyStdDev = 0, 0 // answer at once
	p, err := provider.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(p) // or http.ListenAndServe("127.0.0.1:8081", p)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":3,"messages":[{"role":"user","content":"Summarise this page."}]}`))
	req.Header.Set("Authorization", "Bearer sk-lab")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var answer struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, string(answer.Usage))
	fmt.Println("requests left:", resp.Header.Get("x-ratelimit-remaining-requests"), "tokens left:", resp.Header.Get("x-ratelimit-remaining-tokens"))
	st := p.Stats()
	fmt.Println("served:", st.Accepted, "spent (micro-dollars):", st.MicroDollars)
	// Output:
	// 200 OK {"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}
	// requests left: 1499 tokens left: 299992
	// served: 1 spent (micro-dollars): 24
}

// post sends body to the chat endpoint of the provider at url, with the
// key sk-lab.
func post(url, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer sk-lab")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	return resp, resp.Body.Close()
}

// An account limited as Anthropic limits one, on output tokens a minute: a
// call's output counts at its cap while it runs, and then as what it made.
// The first call counts 900 until it ends with 100; the second then fits,
// and once it has ended too, 800 are left, too few for a third of 850.
func Example_outputTokensPerMinute() {
	opts := provider.DefaultOptions()
	opts.APIKey, opts.Latency, opts.LatencyStdDev = "sk-lab", 0, 0
	opts.OutputTokensPerMinute = 1000
	opts.AnswerTokens = 100 // every answer ends after 100 tokens, whatever its cap
	p, err := provider.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	for _, maxTokens := range []string{"900", "900", "850"} {
		resp, err := post(srv.URL, `{"model":"gpt-4o","max_tokens":`+maxTokens+`,"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(resp.Status, "output tokens left:", resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"))
	}
	st := p.Stats()
	fmt.Println("completion tokens:", st.CompletionTokens, "refused for output:", st.Rejected429OutputTokens)
	// Output:
	// 200 OK output tokens left: 100
	// 200 OK output tokens left: 0
	// 429 Too Many Requests output tokens left: 800
	// completion tokens: 200 refused for output: 1
}

// Each class of a call's tokens is billed at its price, and GET /stats
// (or Stats) counts each class, and the bill of each service tier. The
// second of two calls to o3 at the flex tier reads 1,280 tokens of its
// prompt from the cache; each reasons 100 tokens of its 300.
func Example_classes() {
	opts := provider.DefaultOptions()
	opts.APIKey, opts.Latency, opts.LatencyStdDev = "sk-lab", 0, 0
	opts.Models = append(opts.Models, "o3")
	p, err := provider.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	history := strings.Repeat("Once upon a time, ", 300) // 5,400 bytes: 1,350 tokens
	for range 2 {
		if _, err := post(srv.URL, `{"model":"o3","service_tier":"flex","max_completion_tokens":300,"messages":[{"role":"user","content":"`+history+`"}]}`); err != nil {
			fmt.Println(err)
			return
		}
	}
	st := p.Stats()
	fmt.Println("prompt:", st.PromptTokens, "of which cached:", st.CachedPromptTokens)
	fmt.Println("completion:", st.CompletionTokens, "of which reasoning:", st.ReasoningTokens)
	fmt.Println("at flex:", st.Tiers.Flex.MicroDollars, "micro-dollars, in all:", st.MicroDollars)
	// Output:
	// prompt: 2700 of which cached: 1280
	// completion: 600 of which reasoning: 200
	// at flex: 3222 micro-dollars, in all: 3222
}

// An account that serves Anthropic's Messages API caches as Anthropic
// does: the first call writes the system prompt it marks, 1,250 tokens, to
// the cache for five minutes, at 1.25 times the input price, and the second
// reads it, at a tenth.
func Example_anthropic() {
	opts := provider.DefaultOptions()
	opts.API, opts.Models = provider.APIAnthropic, []string{"claude-sonnet-5-5"}
	opts.APIKey, opts.Latency, opts.LatencyStdDev = "sk-lab", 0, 0
	opts.AnswerTokens = 10
	p, err := provider.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	body := `{"model":"claude-sonnet-5-5","max_tokens":100,` +
		`"system":[{"type":"text","text":"` + strings.Repeat("abcd", 1250) + `","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":"Summarise this page."}]}`
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("x-api-key", "sk-lab")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		var message struct {
			Usage struct {
				Input   int64 `json:"input_tokens"`
				Written int64 `json:"cache_creation_input_tokens"`
				Read    int64 `json:"cache_read_input_tokens"`
				Output  int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&message)
		resp.Body.Close()
		if err != nil {
			fmt.Println(err)
			return
		}
		u := message.Usage
		fmt.Println(resp.Status, "input:", u.Input, "written:", u.Written, "read:", u.Read, "output:", u.Output)
	}
	fmt.Println("spent (micro-dollars):", p.Stats().MicroDollars)
	// Output:
	// 200 OK input: 5 written: 1250 read: 0 output: 10
	// 200 OK input: 5 written: 0 read: 1250 output: 10
	// spent (micro-dollars): 5153
}
