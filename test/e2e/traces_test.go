package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each ExportTraceServiceRequest POSTed
// to /v1/traces and keeps its spans, with the values of every attribute it was sent.
type otlpReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	spans  []*tracepb.Span
	values []string // every attribute value, of spans, their events and links, and resources
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.keep(&req)
	answer, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(answer)
}

// keep keeps the spans of req and the values of all its attributes.
func (rc *otlpReceiver) keep(req *coltracepb.ExportTraceServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		rc.values = appendValues(rc.values, rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				rc.spans = append(rc.spans, sp)
				rc.values = appendValues(rc.values, sp.Attributes)
				for _, e := range sp.Events {
					rc.values = appendValues(rc.values, e.Attributes)
				}
				for _, l := range sp.Links {
					rc.values = appendValues(rc.values, l.Attributes)
				}
			}
		}
	}
}

func appendValues(values []string, attrs []*commonpb.KeyValue) []string {
	for _, kv := range attrs {
		values = append(values, kv.Key+"="+kv.Value.String())
	}
	return values
}

// callSpans are the server spans received: one a call.
func (rc *otlpReceiver) callSpans() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var calls []*tracepb.Span
	for _, sp := range rc.spans {
		if sp.Kind == tracepb.Span_SPAN_KIND_SERVER {
			calls = append(calls, sp)
		}
	}
	return calls
}

// children are the spans received whose parent is sp, in the order they started.
func (rc *otlpReceiver) children(sp *tracepb.Span) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, c := range rc.spans {
		if bytes.Equal(c.ParentSpanId, sp.SpanId) && bytes.Equal(c.TraceId, sp.TraceId) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *tracepb.Span) int { return int(int64(a.StartTimeUnixNano) - int64(b.StartTimeUnixNano)) })
	return out
}

// attr is the value of a span's attribute as a string, or "".
func attr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			return fmt.Sprint(v.DoubleValue)
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		}
	}
	return ""
}

// tracedProvider answers chat completions as upstream does, after answering its first failures
// calls with status; it keeps the traceparent of every call it received.
type tracedProvider struct {
	*upstream
	status       int
	failures     int64
	seen         atomic.Int64
	mu           sync.Mutex
	traceparents []string
}

func newTracedProvider(t *testing.T, status int, failures int64) *tracedProvider {
	p := &tracedProvider{upstream: &upstream{}, status: status, failures: failures}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.traceparents = append(p.traceparents, r.Header.Get("Traceparent"))
		p.mu.Unlock()
		if p.seen.Add(1) <= p.failures {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Retry-After-Ms", "10")
			http.Error(w, `{"error":{"message":"busy","type":"server_error"}}`, p.status)
			return
		}
		p.serve(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// tracesConfig is a pool of two providers of gpt-4o-mini, first and second, each retried once,
// and alice, who may send one call a second and queues the others.
func tracesConfig(t *testing.T, first, second string) string {
	provider := func(name, url string) string {
		return fmt.Sprintf(`  - name: %s
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 50}
    tokensPerMinute: 1000000
    retry: {maxAttempts: 2, baseDelay: 10ms, maxDelay: 100ms}
    prices: {inputPerMillion: "3.00", outputPerMillion: "15.00"}
`, name, url)
	}
	return writeKeyedConfig(t, `apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
`+provider("first", first)+provider("second", second)+fmt.Sprintf(`tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [first, second]
    perUser:
      - {dimension: requests, amount: 1, per: second, onLimit: Queue}
`, gatewayv1.HashKey(keyAlice)))
}

// The client's trace context of the first call in TestCallsAreTracedOverOTLP.
const (
	otlpClientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	otlpClientSpan  = "00f067aa0ba902b7"
)

// TestCallsAreTracedOverOTLP runs a gateway whose traces go to an OTLP receiver as the SDK's
// environment variables say, and sends two calls at once from a user who may send one a second,
// to a pool whose first provider answers 503 and whose second answers 429 once: one call queues,
// one is retried at the first provider and fails over to the second, whose 429 is retried. Each
// call is a span with its admission, its wait in the queue, its attempts and its settlement as
// children, carrying the GenAI conventions' attributes; the provider receives the attempt's
// trace context; no key, prompt or answer is in any attribute; and the GenAI metrics count both.
func TestCallsAreTracedOverOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary; skipped with -short")
	}
	receiver := newOTLPReceiver(t)
	first := newTracedProvider(t, http.StatusServiceUnavailable, 1<<30)
	second := newTracedProvider(t, http.StatusTooManyRequests, 1)
	api, admin := freeAddr(t), freeAddr(t)
	cmd := exec.Command(gatewayBin, "--config", tracesConfig(t, first.URL, second.URL), "--name", "gw-traced",
		"--listen", api, "--admin-listen", admin, "--admin-token-file", adminTokenFile(t))
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL, "OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=sluice-e2e")
	g := &gateway{api: "http://" + api, admin: "http://" + admin, proc: proc.Start(t, "gateway", cmd)}
	poll.Until(t, processWait, "the gateway to be ready", func() bool {
		resp, err := http.Get(g.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	var wg sync.WaitGroup
	for i, traceparent := range []string{"00-" + otlpClientTrace + "-" + otlpClientSpan + "-01", ""} {
		wg.Go(func() {
			if a := g.postTraced(t, chatBody, traceparent); a.status != http.StatusOK {
				t.Errorf("call %d: %d %s", i, a.status, a.body)
			}
		})
	}
	wg.Wait()
	poll.Until(t, processWait, "the receiver to hold both calls' spans", func() bool {
		calls := receiver.callSpans()
		return len(calls) == 2 && len(receiver.children(calls[0])) > 0 && len(receiver.children(calls[1])) > 0
	})

	checkCallTrees(t, receiver)
	checkProviderTraceparents(t, receiver, second)
	checkNoSecrets(t, receiver)
	checkGenAIMetrics(t, g)
}

// postTraced posts a chat completion as alice, with traceparent unless it is empty.
func (g *gateway) postTraced(t *testing.T, body, traceparent string) answer {
	req, err := http.NewRequest(http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return answer{}
	}
	req.Header.Set("Authorization", "Bearer "+keyAlice)
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// checkCallTrees checks each call's span and its children: admission first and settlement last,
// an attempt span for each attempt at a provider, and across the two calls a wait in the queue,
// a retry at the first provider and a failover to the second.
func checkCallTrees(t *testing.T, rc *otlpReceiver) {
	t.Helper()
	queued, failedOver := false, false
	for _, call := range rc.callSpans() {
		checkCallSpan(t, call)
		children := rc.children(call)
		var names, providers []string
		for _, c := range children {
			names = append(names, c.Name)
			if c.Kind == tracepb.Span_SPAN_KIND_CLIENT {
				providers = append(providers, attr(c, "gen_ai.provider.name"))
			}
			if c.Name == "admission" && slices.ContainsFunc(rc.children(c), func(q *tracepb.Span) bool { return q.Name == "queue" }) {
				queued = true
			}
		}
		if names[0] != "admission" || names[len(names)-1] != "settlement" || len(providers) == 0 {
			t.Errorf("call %s has children %v; want its admission, its attempts and its settlement", call.Name, names)
		}
		if len(providers) >= 3 && providers[0] == "first" && providers[1] == "first" && providers[len(providers)-1] == "second" {
			failedOver = true
		}
		t.Logf("call %s (trace %x): children %v, attempts at %v", call.Name, call.TraceId, names, providers)
	}
	if !queued {
		t.Error("no call's admission has a queue span: the second call did not wait, or its wait was not traced")
	}
	if !failedOver {
		t.Error("no call was attempted twice at the first provider and then at the second")
	}
}

// checkCallSpan checks the attributes of a call's span: the GenAI conventions' and Sluice's own.
func checkCallSpan(t *testing.T, call *tracepb.Span) {
	t.Helper()
	want := map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "second",
		"gen_ai.response.model": "gpt-4o-mini", "gen_ai.response.id": "c1", "gen_ai.request.max_tokens": "100",
		"gen_ai.usage.input_tokens": fmt.Sprint(upstreamPrompt), "gen_ai.usage.output_tokens": fmt.Sprint(upstreamCompletion),
		"sluice.tenant": "acme", "sluice.user": "alice", "sluice.outcome": "ok", "sluice.cost_usd": "6.6e-05",
		"http.response.status_code": "200",
	}
	for k, v := range want {
		if got := attr(call, k); got != v {
			t.Errorf("call span %s has %s = %q; want %q", call.Name, k, got, v)
		}
	}
	if call.Name != "chat gpt-4o-mini" {
		t.Errorf("call span named %q; want %q", call.Name, "chat gpt-4o-mini")
	}
	if attr(call, "sluice.request_id") == "" || attr(call, "sluice.queue.wait_ms") == "" {
		t.Errorf("call span %s has no sluice.request_id or sluice.queue.wait_ms", call.Name)
	}
	if id := hex.EncodeToString(call.TraceId); id == otlpClientTrace && hex.EncodeToString(call.ParentSpanId) != otlpClientSpan {
		t.Errorf("the call in the client's trace has parent %x; want the client's span %s", call.ParentSpanId, otlpClientSpan)
	}
}

// checkProviderTraceparents checks that the client's trace reached the second provider, and that
// every traceparent the provider received names an attempt span the gateway exported.
func checkProviderTraceparents(t *testing.T, rc *otlpReceiver, p *tracedProvider) {
	t.Helper()
	rc.mu.Lock()
	attempts := map[string]bool{}
	for _, sp := range rc.spans {
		if sp.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			attempts[fmt.Sprintf("00-%x-%x-01", sp.TraceId, sp.SpanId)] = true
		}
	}
	rc.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	inClientTrace := false
	for _, tp := range p.traceparents {
		if !attempts[tp] {
			t.Errorf("the provider received traceparent %q, which names no attempt span", tp)
		}
		inClientTrace = inClientTrace || strings.HasPrefix(tp, "00-"+otlpClientTrace+"-")
	}
	if !inClientTrace {
		t.Errorf("no traceparent the provider received, %v, is in the client's trace %s", p.traceparents, otlpClientTrace)
	}
}

// checkNoSecrets fails if any attribute the receiver got holds a key, the prompt or the answer.
func checkNoSecrets(t *testing.T, rc *otlpReceiver) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, v := range rc.values {
		for _, secret := range []string{keyAlice, providerKey, "Say hello", "Hello there"} {
			if strings.Contains(v, secret) {
				t.Errorf("an exported attribute, %s, holds %q", v, secret)
			}
		}
	}
}

// checkGenAIMetrics checks that the GenAI conventions' metrics counted both calls, at the second
// provider, each with its input and output tokens.
func checkGenAIMetrics(t *testing.T, g *gateway) {
	t.Helper()
	resp, err := adminGet(g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	labels := `gen_ai_operation_name="chat",gen_ai_provider_name="second",gen_ai_request_model="gpt-4o-mini"`
	for _, series := range []string{
		`gen_ai_client_operation_duration_seconds_count{error_type="",` + labels + `} 2`,
		`gen_ai_client_token_usage_sum{` + labels + `,gen_ai_token_type="input"} ` + fmt.Sprint(2*upstreamPrompt),
		`gen_ai_client_token_usage_sum{` + labels + `,gen_ai_token_type="output"} ` + fmt.Sprint(2*upstreamCompletion),
	} {
		if !strings.Contains(string(page), series) {
			t.Errorf("/metrics has no line %s", series)
		}
	}
}
