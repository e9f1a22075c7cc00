package chaos

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/test/poll"
)

// faultTokens is the completion every call of the provider faults asks for.
const faultTokens = 50

// faultyProvider is a provider on loopback that answers each call as the test last told it to.
// It is safe for concurrent use.
type faultyProvider struct {
	*httptest.Server
	mu     sync.Mutex
	answer http.HandlerFunc
}

func startFaultyProvider(t *testing.T) *faultyProvider {
	p := &faultyProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // as a provider reads the call before it answers
		p.mu.Lock()
		answer := p.answer
		p.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *faultyProvider) answerWith(h http.HandlerFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = h
}

// chunk is an SSE chunk of a streamed completion: data is its delta.
func chunk(delta string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `}]}` + "\n\n"
}

// usageChunk is the final chunk of a stream that asked for its usage: 7 prompt and 3 completion
// tokens.
const usageChunk = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}` + "\n\n"

// startStream answers 200 with an event stream and sends lines, flushed.
func startStream(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, l := range lines {
		io.WriteString(w, l)
	}
	w.(http.Flusher).Flush()
}

// hangUp closes the call's connection without another byte.
func hangUp(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// The charges a call can end with, as functions of its estimate in tokens (a token is a
// micro-dollar).
var (
	nothing     = func(int64) int64 { return 0 }
	itsUsage    = func(int64) int64 { return 10 }
	itsEstimate = func(est int64) int64 { return est }
	// itsPrompt is the estimate without its completion: a stream that broke before any text.
	itsPrompt = func(est int64) int64 { return est - faultTokens }
)

// TestProviderFaults sends one call to each way a provider can fail mid-call: stall, answer
// garbage, hang up. Each client receives an OpenAI error body, or a stream that ends cleanly
// (with an error event when the gateway cut it); afterwards no slot stays in flight, and the
// tenant is charged no more than the provider served: nothing for a call it never answered, the
// usage it reported, the text a broken stream sent, or the estimate of an answer the provider
// billed (it said 200) but that cannot be read.
func TestProviderFaults(t *testing.T) {
	skipShort(t)
	p := startFaultyProvider(t)
	g := startGateway(t, writeConfig(t, settings{provider: p.URL, maxInFlight: 4,
		timeout: "2s", stallTimeout: "1s", callTimeout: "10s"}))
	tests := []struct {
		name   string
		stream bool
		answer http.HandlerFunc
		status int
		code   string // of the error body, or of the stream's last event; "" for a clean answer
		charge func(estimate int64) int64
		says   string // in the answer, as to what was charged
	}{
		{
			name: "a stream that stalls is cut with an error event", stream: true,
			answer: func(w http.ResponseWriter, r *http.Request) {
				startStream(w, chunk(`{"role":"assistant"}`))
				<-r.Context().Done()
			},
			status: http.StatusOK, code: "provider_timeout", charge: itsPrompt,
		},
		{
			name: "a stream broken off ends with an error event", stream: true,
			answer: func(w http.ResponseWriter, r *http.Request) {
				startStream(w, chunk(`{"role":"assistant"}`))
				panic(http.ErrAbortHandler)
			},
			status: http.StatusOK, code: "provider_stream_broken", charge: itsPrompt,
		},
		{
			name: "a stream with garbage lines ends cleanly at its usage", stream: true,
			answer: func(w http.ResponseWriter, r *http.Request) {
				startStream(w, chunk(`{"role":"assistant"}`), "data: {not json\n\n", "garbage without a field\n\n", "data: {\"choices\":[{\"delta\":\n\n",
					chunk(`{"content":"Hello"}`), usageChunk, "data: [DONE]\n\n")
			},
			status: http.StatusOK, charge: itsUsage,
		},
		{
			name: "a 200 that is not JSON",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
			},
			status: http.StatusBadGateway, code: "provider_bad_answer", charge: itsEstimate,
		},
		{
			name: "a 200 of truncated JSON",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assis`)
			},
			status: http.StatusBadGateway, code: "provider_bad_answer", charge: itsEstimate,
		},
		{
			name: "a connection closed before the headers",
			answer: func(w http.ResponseWriter, r *http.Request) {
				hangUp(w)
			},
			status: http.StatusBadGateway, code: "provider_unreachable", charge: nothing, says: "Nothing was charged",
		},
		{
			name: "a connection closed mid-body",
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "1000")
				io.WriteString(w, `{"id":"c1","object":`)
				w.(http.Flusher).Flush()
				hangUp(w)
			},
			status: http.StatusBadGateway, code: "provider_unreachable", charge: itsEstimate, says: "charged at its estimate",
		},
		{
			name: "no headers before the timeout",
			answer: func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
			status: http.StatusGatewayTimeout, code: "provider_timeout", charge: nothing,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p.answerWith(tc.answer)
			spentBefore, estimatedBefore := g.tenantSpend(t), g.metric(t, `sluice_gateway_tokens_total{kind="estimated"`)
			a := g.chat("Say hello.", tc.stream, faultTokens)
			if a.err != nil || a.status != tc.status {
				t.Fatalf("got %d %s (%v); want %d", a.status, a.body, a.err, tc.status)
			}
			if got := endCode(t, a, tc.stream); got != tc.code {
				t.Errorf("the answer ends with code %q; want %q:\n%s", got, tc.code, a.body)
			}
			if !strings.Contains(string(a.body), tc.says) {
				t.Errorf("the answer does not say %q:\n%s", tc.says, a.body)
			}
			poll.Until(t, processWait, "the call to end", func() bool { return g.inFlight(t) == 0 })
			estimate := int64(g.metric(t, `sluice_gateway_tokens_total{kind="estimated"`) - estimatedBefore)
			if got, want := g.tenantSpend(t)-spentBefore, tc.charge(estimate); got != want {
				t.Errorf("charged %d µ$; want %d (the call's estimate is %d)", got, want, estimate)
			}
		})
	}
}

// endCode is the code of a JSON answer's OpenAI error body, or of a stream's error event, which
// must be its last; "" when the answer is not an error. It fails the test for an error answer
// that is not an OpenAI error body, and for a stream that does not end cleanly.
func endCode(t *testing.T, a answer, stream bool) string {
	t.Helper()
	if !stream {
		if a.status == http.StatusOK {
			return ""
		}
		code := a.errorCode()
		if code == "" {
			t.Errorf("answer %d is not an OpenAI error body: %s", a.status, a.body)
		}
		return code
	}
	body := strings.TrimRight(string(a.body), "\n")
	last := body[strings.LastIndex(body, "\n")+1:]
	if last == "data: [DONE]" {
		return ""
	}
	data, ok := strings.CutPrefix(last, "data: ")
	code := answer{body: []byte(data)}.errorCode()
	if !ok || code == "" || !strings.HasSuffix(string(a.body), "\n\n") {
		t.Errorf("the stream ends with %q; want [DONE] or an error event, then a blank line", last)
	}
	return code
}
