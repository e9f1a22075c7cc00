package estimate_test

import (
	"fmt"

	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
)

func Example() {
	counter := estimate.NewCounter() // once per process

	body := []byte(`{"model":"gpt-4o","max_tokens":100,"n":2,"stream":true,
		"messages":[{"role":"user","content":"tiktoken is great!"}]}`)
	req, err := estimate.Parse(estimate.Chat, body)
	if err != nil {
		fmt.Println(err) // answer 400 with OpenAI's error body
		return
	}
	est := req.Estimate(counter, "o200k_base", 4096)
	fmt.Println(req.Model, req.Stream, est.PromptTokens, est.CompletionTokens, est.Total())

	// Streamed: ask the provider for the final usage chunk, and watch for it.
	body, err = estimate.WithStreamUsage(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s\n", body) // send this body to the provider
	usage := estimate.NewStreamUsage(counter, "o200k_base", est.PromptTokens)
	usage.Observe([]byte(`{"choices":[{"index":0,"delta":{"content":"Indeed"}}]}`))
	usage.Observe([]byte(`{"choices":[],"service_tier":"default","usage":{"prompt_tokens":13,"completion_tokens":2,"total_tokens":15,` +
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}}`))
	usage.Observe([]byte(`[DONE]`))
	u, reported := usage.Usage()
	fmt.Println(u.PromptTokens, u.CachedPromptTokens, u.CompletionTokens, u.ServiceTier, reported)

	_, err = estimate.Parse(estimate.Chat, []byte(`{"model":"gpt-4o","max_tokens":-1}`))
	fmt.Println(err)
	// Output:
	// gpt-4o true 13 200 213
	// {"max_tokens":100,"messages":[{"role":"user","content":"tiktoken is great!"}],"model":"gpt-4o","n":2,"stream":true,"stream_options":{"include_usage":true}}
	// 13 0 2 default true
	// estimate: invalid value for max_tokens: must be 1 or more
}
