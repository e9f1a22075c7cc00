package estimate

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// typicalChat returns a chat request of about 800 prompt tokens: a system
// prompt, a short exchange and a long question.
func typicalChat(tb testing.TB) []byte {
	tb.Helper()
	paragraph := "The gateway admits a request only when every level it passes has room for it, " +
		"and settles the difference once the provider reports what the call really cost. "
	body := map[string]any{
		"model":      "gpt-4o",
		"max_tokens": 512,
		"stream":     true,
		"messages": []map[string]any{
			{"role": "system", "content": "You are a careful assistant. Answer briefly and cite the design document."},
			{"role": "user", "content": "What happens when Redis is unreachable?"},
			{"role": "assistant", "content": "The gateway does what failMode says: closed refuses with 503, open limits locally."},
			{"role": "user", "content": []map[string]any{
				{"type": "text", "text": strings.Repeat(paragraph, 25)},
			}},
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkParseEstimate(b *testing.B) {
	body := typicalChat(b)
	for _, enc := range []string{"o200k_base", "cl100k_base", ""} {
		name := enc
		if name == "" {
			name = "proxy"
		}
		b.Run(name, func(b *testing.B) {
			counter.Count(enc, "warm up") // load the encoding outside the timer
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var est Estimate
			for b.Loop() {
				r, err := Parse(Chat, body)
				if err != nil {
					b.Fatal(err)
				}
				est = r.Estimate(uncachedCounter, enc, 4096)
			}
			b.ReportMetric(float64(est.PromptTokens), "prompt-tokens")
		})
	}
}

func BenchmarkCount(b *testing.B) {
	texts := map[string]string{
		"prose": strings.Repeat("The gateway admits a request only when every level it passes has room for it, "+
			"and settles the difference once the provider reports what the call really cost. ", 25),
		"code": strings.Repeat("func f(x int) int {\n\treturn x*2 // ok\n}\n", 60),
		"cjk":  strings.Repeat("お誕生日おめでとう、生日快乐。", 60),
	}
	for _, enc := range []string{"o200k_base", "cl100k_base", "r50k_base"} {
		for _, name := range []string{"prose", "code", "cjk"} {
			text := texts[name]
			b.Run(enc+"/"+name, func(b *testing.B) {
				counter.Count(enc, "warm up") // load the encoding outside the timer
				b.ReportAllocs()
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					uncachedCounter.Count(enc, text)
				}
			})
		}
	}
}

// uncachedCounter is counter keeping no count: every text is counted, as one seen first is.
var uncachedCounter = &Counter{encoders: counter.encoders}

// BenchmarkCountAgain measures counting a transcript of 40,000 tokens that was counted before,
// as a chat's is with each turn.
func BenchmarkCountAgain(b *testing.B) {
	text := sizedTexts(160 << 10)[0].text
	counter.Count("o200k_base", text)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		counter.Count("o200k_base", text)
	}
}

// sizedTexts are texts of about size bytes: ordinary ones, and the ones whose
// pieces are longest or take the most merges.
func sizedTexts(size int) []struct{ name, text string } {
	repeat := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	letters := rand.New(rand.NewPCG(1, 2))
	word := make([]byte, size)
	for i := range word {
		word[i] = 'a' + byte(letters.IntN(26))
	}
	return []struct{ name, text string }{
		{"prose", repeat("The gateway admits a request only when every level it passes has room for it, " +
			"and settles the difference once the provider reports what the call really cost. ")},
		{"code", repeat("func f(x int) int {\n\treturn x*2 // ok\n}\n")},
		{"spaces", repeat(" ")},
		{"newlines", repeat("\n")},
		{"whitespace", repeat(" \t\n \r\n")},
		{"bang", repeat("!")},
		{"slashes", repeat("/")},
		{"letter", repeat("a")},
		{"capital", repeat("A")},
		{"digits", repeat("1234567890")},
		{"kana", repeat("お")},
		{"emoji", repeat("😀")},
		{"marks", repeat("\u0301")},
		{"controls", repeat("\x01")},
		{"replacement", repeat("\ufffd")},
		{"word", string(word)},
		{"base64", repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0123456789+/")},
		{"alternating", repeat("ab")},
	}
}

// BenchmarkCountMebibyte measures counting 1 MiB of each of sizedTexts: its
// MB/s is the count's cost whatever the text.
func BenchmarkCountMebibyte(b *testing.B) {
	texts := sizedTexts(1 << 20)
	for _, enc := range []string{"cl100k_base", "o200k_base"} {
		for _, tc := range texts {
			b.Run(enc+"/"+tc.name, func(b *testing.B) {
				counter.Count(enc, "warm up") // load the encoding outside the timer
				b.SetBytes(int64(len(tc.text)))
				for b.Loop() {
					uncachedCounter.Count(enc, tc.text)
				}
			})
		}
	}
}

// shortChat is a short chat completion with a cap in max_tokens, as most clients send it.
const shortChat = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hello in one short sentence."}]}`

// BenchmarkWithMaxTokens measures putting the cap in the field the provider reads: moving a
// client's max_tokens to max_completion_tokens, and adding a cap to a body that has none.
func BenchmarkWithMaxTokens(b *testing.B) {
	uncapped := strings.Replace(shortChat, `"max_tokens":16,`, "", 1)
	typical := string(typicalChat(b))
	cases := []struct {
		name string
		body string
		n    int64 // the body's cap, or the default that the gateway adds
	}{{"rename", shortChat, 16}, {"insert", uncapped, 16}, {"rename-long", typical, 512}}
	for _, tc := range cases {
		body := []byte(tc.body)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := WithMaxTokens(body, MaxCompletionTokens, tc.n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseUsage measures reading the usage of answers: a short chat completion's with
// the counts alone, and OpenAI's chat and Responses answers as they come, with the details of
// cached, audio and reasoning tokens and the service tier.
func BenchmarkParseUsage(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"counts", `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, nice to meet you today!"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":14,"completion_tokens":16,"total_tokens":30}}`},
		{"openai-chat", openAIChatAnswer},
		{"openai-responses", openAIResponsesAnswer},
	} {
		body := []byte(tc.body)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, ok := ParseUsage(body); !ok {
					b.Fatal("no usage")
				}
			}
		})
	}
}

// BenchmarkParseEstimateShort measures reading and estimating a short chat completion, the
// gateway's most common call.
func BenchmarkParseEstimateShort(b *testing.B) {
	body := []byte(shortChat)
	counter.Count("o200k_base", "warm up") // load the encoding outside the timer
	b.ReportAllocs()
	for b.Loop() {
		r, err := Parse(Chat, body)
		if err != nil {
			b.Fatal(err)
		}
		r.Estimate(counter, "o200k_base", 4096)
	}
}

// BenchmarkParseEstimateEmbeddings reads and estimates an embeddings call of 64 inputs of about
// 32 tokens each.
func BenchmarkParseEstimateEmbeddings(b *testing.B) {
	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = strings.Repeat("the lab has one big red cat and ", 4)
	}
	body, err := json.Marshal(map[string]any{"model": "text-embedding-3-small", "input": inputs})
	if err != nil {
		b.Fatal(err)
	}
	counter.Count("cl100k_base", "warm up") // load the encoding outside the timer
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r, err := Parse(Embeddings, body)
		if err != nil {
			b.Fatal(err)
		}
		r.Estimate(counter, "cl100k_base", 0)
	}
}

// BenchmarkStreamUsage follows a chat's stream of 200 chunks of 16 tokens each, as OpenAI sends
// them, and its usage chunk.
func BenchmarkStreamUsage(b *testing.B) {
	piece, err := json.Marshal(strings.Repeat("the lab has one big red cat and ", 2))
	if err != nil {
		b.Fatal(err)
	}
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1765100000,"model":"gpt-4o-mini","service_tier":"default",` +
		`"system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":` + string(piece) + `},"logprobs":null,"finish_reason":null}]}`)
	usage := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1765100000,"model":"gpt-4o-mini","choices":[],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":3200,"total_tokens":3212}}`)
	counter.Count("o200k_base", "warm up") // load the encoding outside the timer
	b.ReportAllocs()
	for b.Loop() {
		s := NewStreamUsage(counter, "o200k_base", 12)
		for range 200 {
			s.Observe(chunk)
		}
		s.Observe(usage)
		s.Observe(doneEvent)
	}
}
