package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// benchUsers is how many users the benchmark's calls come from, in turn, each with its own key.
const benchUsers = 10

// benchBody is every benchmark call: a short chat completion.
const benchBody = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hello in one short sentence."}]}`

// benchReply is the stub provider's answer to every call, with its usage.
const benchReply = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, nice to meet you today!"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":14,"completion_tokens":16,"total_tokens":30}}`

// benchStub is a provider that answers every chat completion at once, with the headers OpenAI
// sends: its request id, its processing time and its rate limits, whose remaining counts change
// from one answer to the next (and stay above what the gateway is configured with).
func benchStub(b *testing.B) *httptest.Server {
	var n atomic.Int64
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		used := n.Add(1) % 1000
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Request-Id", "req_"+strconv.FormatInt(used, 10))
		h.Set("Openai-Processing-Ms", "1")
		h.Set("Openai-Version", "2020-10-01")
		h.Set("X-Ratelimit-Limit-Requests", "60000000")
		h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(59999999-used, 10))
		h.Set("X-Ratelimit-Reset-Requests", strconv.FormatInt(used%60+1, 10)+"ms")
		h.Set("X-Ratelimit-Limit-Tokens", "6000000000")
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(5999999000-30*used, 10))
		h.Set("X-Ratelimit-Reset-Tokens", "0s")
		io.WriteString(w, benchReply)
	}))
	b.Cleanup(stub.Close)
	return stub
}

// benchKey is the API key of user u.
func benchKey(u int) string { return fmt.Sprintf("sk-bench-user-%02d", u) }

// benchConfig is a gateway in front of stubURL with a limit that queues at each of the five
// levels (user, tenant, endpoint, global, provider), none of which the benchmark exhausts.
func benchConfig(stubURL string) *gatewayv1.Config {
	const perSecond, perMinute = 1_000_000, 60_000_000
	queue := func(d gatewayv1.Dimension, amount int64, per gatewayv1.Period) []gatewayv1.Limit {
		return []gatewayv1.Limit{{Dimension: d, Amount: amount, Per: per, OnLimit: gatewayv1.BehaviorQueue}}
	}
	keys := make([]gatewayv1.Key, benchUsers)
	for u := range keys {
		keys[u] = gatewayv1.Key{SHA256: gatewayv1.HashKey(benchKey(u)), User: fmt.Sprintf("user-%02d", u)}
	}
	cfg := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion,
		Kind:       gatewayv1.Kind,
		Global:     queue(gatewayv1.DimensionRequests, perSecond, gatewayv1.PeriodSecond),
		Providers: []gatewayv1.Provider{{
			Name:              "stub",
			BaseURL:           stubURL + "/v1",
			Models:            []gatewayv1.Model{{Name: "gpt-4o-mini", Encoding: "o200k_base"}},
			RequestsPerMinute: perMinute,
			TokensPerMinute:   100 * perMinute,
			MaxInFlight:       1 << 20,
			Prices:            gatewayv1.Prices{InputPerMillion: "3.00", OutputPerMillion: "3.00"},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name:      "lab",
			Keys:      keys,
			Providers: []string{"stub"},
			PerUser:   queue(gatewayv1.DimensionRequests, perSecond, gatewayv1.PeriodSecond),
			PerTenant: queue(gatewayv1.DimensionTokens, 100*perMinute, gatewayv1.PeriodMinute),
			Endpoints: []gatewayv1.EndpointLimits{{
				Endpoint: gatewayv1.EndpointChat,
				Limits:   queue(gatewayv1.DimensionRequests, perMinute, gatewayv1.PeriodMinute),
			}},
		}},
	}
	cfg.Default()
	return cfg
}

// benchServer is a gateway with the memory store and benchConfig in force, tracing its calls
// with tracer (nil: none).
func benchServer(tb testing.TB, stubURL string, tracer trace.Tracer) http.Handler {
	p, err := policy.Compile(benchConfig(stubURL), 1)
	if err != nil {
		tb.Fatal(err)
	}
	s := New(Options{Limiter: ratelimit.NewMemory(), Tracer: tracer}) // no jobs: the benchmark sends none
	tb.Cleanup(s.Close)
	s.SetPolicy(p)
	return s.Handler()
}

// serveBench sends b.N chat completions of benchBody through h, from each user in turn, and
// checks each answer.
func serveBench(b *testing.B, h http.Handler) { serveBodyBench(b, h, benchBody) }

// serveBodyBench sends b.N chat completions of body through h, from each user in turn, and
// checks each answer.
func serveBodyBench(b *testing.B, h http.Handler, body string) {
	headers := make([]string, benchUsers)
	for u := range headers {
		headers[u] = "Bearer " + benchKey(u)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", headers[i%benchUsers])
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkServeCall measures one chat completion through the gateway, five limit levels and the
// queue, to a provider on loopback that answers at once; the proxy case is a bare
// httputil.ReverseProxy to the same provider, the yardstick for what the gateway adds. The
// traced cases trace every call, a 1% sample of them sampled, or all of them, their spans
// batched to an exporter that drops them.
func BenchmarkServeCall(b *testing.B) {
	b.Run("gateway", func(b *testing.B) {
		stub := benchStub(b)
		serveBench(b, benchServer(b, stub.URL, nil))
	})
	for _, sampled := range []float64{0.01, 1} {
		b.Run(fmt.Sprintf("gateway/traced=%g%%", 100*sampled), func(b *testing.B) {
			stub := benchStub(b)
			serveBench(b, benchServer(b, stub.URL, benchTracer(b, sampled)))
		})
	}
	b.Run("proxy", func(b *testing.B) {
		stub := benchStub(b)
		target, _ := url.Parse(stub.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.BufferPool = copyBuffers // as a proxy built for load has, and as the gateway's own
		serveBench(b, rp)
	})
}

// longPromptTokens is the length of the long benchmark call's prompt: a transcript of words of
// one token each.
const longPromptTokens = 40_000

// longPromptBody is a chat completion whose prompt is a transcript of longPromptTokens tokens,
// about 156 KiB, with a short answer.
func longPromptBody() string {
	words := [...]string{"the ", "lab ", "has ", "one ", "big ", "red ", "cat ", "and "}
	var prompt strings.Builder
	for i := range longPromptTokens {
		prompt.WriteString(words[i%len(words)])
	}
	return `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"` + prompt.String() + `"}]}`
}

// BenchmarkServeLongPrompt measures one chat completion of a long prompt through the gateway, as
// BenchmarkServeCall does a short one: what the gateway allocates beyond the body the client
// sends, beside the bare proxy that streams it through.
func BenchmarkServeLongPrompt(b *testing.B) {
	body := longPromptBody()
	b.Run("gateway", func(b *testing.B) {
		stub := benchStub(b)
		serveBodyBench(b, benchServer(b, stub.URL, nil), body)
	})
	b.Run("proxy", func(b *testing.B) {
		stub := benchStub(b)
		target, _ := url.Parse(stub.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.BufferPool = copyBuffers
		serveBodyBench(b, rp, body)
	})
}

// benchTracer is a tracer that samples the given share of new traces and batches their spans to
// an exporter that drops them.
func benchTracer(b *testing.B, sampled float64) trace.Tracer {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sampled))))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp.Tracer("bench")
}

// chunkReader reads size bytes in reads of at most chunk bytes, as a stream arrives.
type chunkReader struct{ size, chunk int }

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.size == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.chunk, r.size)
	r.size -= n
	return n, nil
}

// BenchmarkOutbound measures the clock of a call on its way to its provider: its timeouts
// started, its answer watched for stalls through reads of 64 bytes, and everything stopped.
// The JSON case is a short answer in two reads; the stream case, 1,000 reads.
func BenchmarkOutbound(b *testing.B) {
	p, err := policy.Compile(benchConfig("http://127.0.0.1:1"), 1)
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Limiter: ratelimit.NewMemory()})
	b.Cleanup(s.Close)
	s.SetPolicy(p)
	c := &call{offer: offer{route: p.Routes("gpt-4o-mini")[0]}}
	for _, reads := range []int{2, 1000} {
		b.Run(fmt.Sprintf("reads=%d", reads), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 32<<10)
			for b.Loop() {
				o := s.newOutbound(b.Context(), c, nil)
				body := o.watchStall(io.NopCloser(&chunkReader{size: 64 * reads, chunk: 64}))
				for {
					if _, err := body.Read(buf); err != nil {
						break
					}
				}
				o.end()
			}
		})
	}
}

// BenchmarkLearn measures reading a provider's rate-limit headers from its answer and telling
// the gate: an answer without them (as vLLM's), and one with OpenAI's six, whose remaining
// counts and resets change from one answer to the next.
func BenchmarkLearn(b *testing.B) {
	p, err := policy.Compile(benchConfig("http://127.0.0.1:1"), 1)
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Limiter: ratelimit.NewMemory()})
	b.Cleanup(s.Close)
	s.SetPolicy(p)
	openai := func(i int) http.Header {
		return http.Header{
			"X-Ratelimit-Limit-Requests":     {"10000"},
			"X-Ratelimit-Limit-Tokens":       {"30000000"},
			"X-Ratelimit-Remaining-Requests": {strconv.Itoa(9999 - i%100)},
			"X-Ratelimit-Remaining-Tokens":   {strconv.Itoa(29999000 - 10*(i%100))},
			"X-Ratelimit-Reset-Requests":     {strconv.Itoa(6+i%10) + "ms"},
			"X-Ratelimit-Reset-Tokens":       {"2ms"},
		}
	}
	answers := map[string][]http.Header{"none": {{}}, "openai": make([]http.Header, 100)}
	for i := range answers["openai"] {
		answers["openai"][i] = openai(i)
	}
	for _, name := range []string{"none", "openai"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s.learn("stub", answers[name][i%len(answers[name])])
			}
		})
	}
}
