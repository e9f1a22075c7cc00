package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"

	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// The client's trace context in TestACallIsTraced.
const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID      = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// flakyProvider answers 503 to its first call and a chat completion to the others, and keeps the
// traceparent of each call it received.
type flakyProvider struct {
	calls        atomic.Int64
	mu           sync.Mutex
	traceparents []string
}

func (p *flakyProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	p.traceparents = append(p.traceparents, r.Header.Get("Traceparent"))
	p.mu.Unlock()
	if p.calls.Add(1) == 1 {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, `{"id":"chatcmpl-9","model":"m-2026-01-01","choices":[{"message":{"content":"Hello from the model."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
}

// newTracedGateway is a settle gateway in front of providerURL whose calls are traced to rec,
// every one sampled; its provider's first attempt is retried once at once.
func newTracedGateway(t *testing.T, providerURL string) (*Server, *tracetest.SpanRecorder) {
	t.Helper()
	cfg := settleConfig(providerURL)
	cfg.Providers[0].Retry = gatewayv1.Retry{MaxAttempts: 2, BaseDelay: metav1.Duration{Duration: time.Millisecond},
		MaxDelay: metav1.Duration{Duration: time.Millisecond}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	s := New(Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{MaxAttempts: 1}), Tracer: tp.Tracer("test")})
	s.SetPolicy(p)
	t.Cleanup(s.Close)
	return s, rec
}

// TestACallIsTraced sends a call that its provider fails once, with the client's traceparent: the
// call's span continues the client's trace and has its admission, both attempts and its
// settlement as children, each attempt's traceparent reaches the provider, the call's span
// carries the GenAI attributes, and no attribute holds the key, the prompt or the answer.
func TestACallIsTraced(t *testing.T) {
	provider := &flakyProvider{}
	stub := httptest.NewServer(provider)
	t.Cleanup(stub.Close)
	s, rec := newTracedGateway(t, stub.URL)

	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	r.Header.Set("Traceparent", clientTraceparent)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}

	spans := rec.Ended()
	var callSpan sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.SpanKind() == trace.SpanKindServer {
			callSpan = sp
		}
	}
	if callSpan == nil {
		t.Fatalf("no call span among %d spans", len(spans))
	}
	if got := callSpan.Parent().SpanID().String(); got != clientSpanID || callSpan.SpanContext().TraceID().String() != clientTraceID {
		t.Errorf("the call's span has parent %s in trace %s; want the client's %s in %s", got, callSpan.SpanContext().TraceID(), clientSpanID, clientTraceID)
	}
	var children []string
	var attempts []sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.Parent().SpanID() != callSpan.SpanContext().SpanID() {
			continue
		}
		children = append(children, sp.Name())
		if sp.SpanKind() == trace.SpanKindClient {
			attempts = append(attempts, sp)
		}
	}
	if diff := cmp.Diff([]string{"admission", "chat m", "chat m", "settlement"}, children); diff != "" {
		t.Errorf("the call's children (-want +got):\n%s", diff)
	}
	var sent []string
	for _, a := range attempts {
		sent = append(sent, "00-"+clientTraceID+"-"+a.SpanContext().SpanID().String()+"-01")
	}
	if diff := cmp.Diff(sent, provider.traceparents); diff != "" {
		t.Errorf("the provider's traceparents (-attempts' spans +received):\n%s", diff)
	}
	if len(attempts) == 2 && attempts[0].Status().Code != codes.Error {
		t.Errorf("the first attempt's status is %v; want an error (503)", attempts[0].Status())
	}

	got := attributes(callSpan)
	want := map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "lab", "gen_ai.request.model": "m",
		"gen_ai.response.model": "m-2026-01-01", "gen_ai.response.id": "chatcmpl-9", "gen_ai.request.max_tokens": "50",
		"gen_ai.usage.input_tokens": "10", "gen_ai.usage.output_tokens": "20",
		"sluice.tenant": "acme", "sluice.user": "alice", "sluice.outcome": "ok", "sluice.cost_usd": "5e-05",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the call's span has %s = %q; want %q", k, got[k], v)
		}
	}
	for _, sp := range spans {
		for k, v := range attributes(sp) {
			for _, secret := range []string{settleKey, "Say hello.", "Hello from the model."} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q has %s = %q, which holds %q", sp.Name(), k, v, secret)
				}
			}
		}
	}
}

// attributes are a span's attributes, their values as strings.
func attributes(sp sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range sp.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// TestAnUntracedCallPassesItsClientsTraceContext sends a call through a gateway that traces
// nothing: its provider receives the client's traceparent and tracestate as the client sent them.
func TestAnUntracedCallPassesItsClientsTraceContext(t *testing.T) {
	var got http.Header
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got = r.Header.Clone()
		io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
	}))
	t.Cleanup(stub.Close)
	g := newSettleGateway(t, stub.URL)

	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	r.Header.Set("Traceparent", clientTraceparent)
	r.Header.Set("Tracestate", "vendor=value")
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got.Get("Traceparent") != clientTraceparent || got.Get("Tracestate") != "vendor=value" {
		t.Errorf("the provider received traceparent %q and tracestate %q; want the client's", got.Get("Traceparent"), got.Get("Tracestate"))
	}
}
