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

	"github.com/google/go-cmp/cmp"
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

// scriptedProvider answers chat completions as upstream does, after answering its first calls
// with the statuses of its script in turn, whichever provider of the gateway's configuration
// sent them; it keeps the traceparent of every call it received.
type scriptedProvider struct {
	*upstream
	script       []int
	seen         atomic.Int64
	mu           sync.Mutex
	traceparents []string
}

func newScriptedProvider(t *testing.T, script ...int) *scriptedProvider {
	p := &scriptedProvider{upstream: &upstream{}, script: script}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.traceparents = append(p.traceparents, r.Header.Get("Traceparent"))
		p.mu.Unlock()
		if i := p.seen.Add(1) - 1; i < int64(len(p.script)) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Retry-After-Ms", "10")
			http.Error(w, `{"error":{"message":"busy","type":"server_error"}}`, p.script[i])
			return
		}
		p.serve(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// tracesConfig is a pool of two providers of gpt-4o-mini, first and second, both at pooled and
// each retried once; a third provider of gpt-4o at held; and alice, who may have one call in
// flight and queues the others.
func tracesConfig(t *testing.T, pooled, held string) string {
	provider := func(name, url, model string) string {
		return fmt.Sprintf(`  - name: %s
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: %s, encoding: o200k_base, defaultMaxTokens: 50}
    tokensPerMinute: 1000000
    retry: {maxAttempts: 2, baseDelay: 10ms, maxDelay: 100ms}
    prices: {inputPerMillion: "3.00", outputPerMillion: "15.00"}
`, name, url, model)
	}
	return writeKeyedConfig(t, `apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
`+provider("first", pooled, "gpt-4o-mini")+provider("second", pooled, "gpt-4o-mini")+provider("third", held, "gpt-4o")+
		fmt.Sprintf(`tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [first, second, third]
    perUser:
      - {dimension: inFlight, amount: 1, onLimit: Queue}
`, gatewayv1.HashKey(keyAlice)))
}

// The client's trace context of the queued call in TestCallsAreTracedOverOTLP.
const (
	otlpClientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	otlpClientSpan  = "00f067aa0ba902b7"
)

// heldStream is alice's stream of gpt-4o, which the third provider holds until it is released.
const heldStream = `{"model":"gpt-4o","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hold acme"}]}`

// TestCallsAreTracedOverOTLP runs a gateway whose traces go to an OTLP receiver as the SDK's
// environment variables say. Alice, who may have one call in flight, holds a stream at a third
// provider while she sends a chat completion in her client's trace, which waits in the queue;
// once the stream ends it goes to one provider of its pool of two, which answers 503 twice, and
// fails over to the other, which answers 429 once. That call's span has, in order, its admission
// with its wait in the queue, its two attempts at the first provider it went to, its admission to
// the other, its two attempts there and its settlement, each attempt ended before the next
// began, and carries the GenAI conventions' attributes; the stream's span has its one attempt.
// The providers receive each attempt's trace context; no key, prompt or answer is in any
// attribute; and the GenAI metrics count both calls, the stream's first chunk too.
func TestCallsAreTracedOverOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway binary; skipped with -short")
	}
	receiver := newOTLPReceiver(t)
	pooled := newScriptedProvider(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	third := newStreamHolder(t)
	g := startTracedGateway(t, tracesConfig(t, pooled.URL, third.URL), receiver.URL)

	streamed := make(chan answer, 1)
	go func() { streamed <- g.postTraced(t, heldStream, "") }()
	poll.Until(t, processWait, "the third provider to hold alice's stream", func() bool {
		open, _ := third.holding("acme")
		return open == 1
	})
	queued := make(chan answer, 1)
	go func() { queued <- g.postTraced(t, chatBody, "00-"+otlpClientTrace+"-"+otlpClientSpan+"-01") }()
	poll.Until(t, processWait, "alice's call to wait in the queue", func() bool { return queuedOf(t, []*gateway{g}, "acme") == 1 })
	third.release()
	for name, ch := range map[string]chan answer{"the stream": streamed, "the queued call": queued} {
		if a := <-ch; a.status != http.StatusOK {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	poll.Until(t, processWait, "the receiver to hold both calls' settlements", func() bool {
		calls := receiver.callSpans()
		return len(calls) == 2 && receiver.settled(calls[0]) && receiver.settled(calls[1])
	})

	answered := checkQueuedCallTree(t, receiver)
	checkStreamTree(t, receiver)
	checkProviderTraceparents(t, receiver, pooled)
	checkNoSecrets(t, receiver)
	checkGenAIMetrics(t, g, answered)
}

// startTracedGateway starts a gateway of config whose traces go to the OTLP receiver at
// endpoint, every call sampled, and waits until it is ready.
func startTracedGateway(t *testing.T, config, endpoint string) *gateway {
	api, admin := freeAddr(t), freeAddr(t)
	cmd := exec.Command(gatewayBin, "--config", config, "--name", "gw-traced",
		"--listen", api, "--admin-listen", admin, "--admin-token-file", adminTokenFile(t))
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=sluice-e2e")
	g := &gateway{api: "http://" + api, admin: "http://" + admin, proc: proc.Start(t, "gateway", cmd)}
	poll.Until(t, processWait, "the gateway to be ready", func() bool {
		resp, err := http.Get(g.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return g
}

// settled reports whether the receiver holds the settlement span of call.
func (rc *otlpReceiver) settled(call *tracepb.Span) bool {
	return slices.ContainsFunc(rc.children(call), func(c *tracepb.Span) bool { return c.Name == "settlement" })
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

// callIn is the call span received in trace, in hex, or nil.
func (rc *otlpReceiver) callIn(trace string) *tracepb.Span {
	for _, call := range rc.callSpans() {
		if hex.EncodeToString(call.TraceId) == trace {
			return call
		}
	}
	return nil
}

// treeStep is one child of a call's span as a test expects it: its name, and for an attempt
// the provider and the status it answered.
type treeStep struct {
	name, provider, status string
}

// tree is what the children of call say, in the order they started: each one's name, and each
// attempt's provider and status.
func tree(children []*tracepb.Span) []treeStep {
	var out []treeStep
	for _, c := range children {
		step := treeStep{name: c.Name}
		if c.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			step.provider, step.status = attr(c, "gen_ai.provider.name"), attr(c, "http.response.status_code")
		}
		out = append(out, step)
	}
	return out
}

// checkQueuedCallTree checks the queued call's span, in its client's trace, and its children: its
// admission, with its wait in the queue as a child, two attempts at the provider it went to, its
// admission again, two attempts at the other provider of its pool and its settlement, in that
// order, each attempt ended before the next began. It returns the provider that answered.
func checkQueuedCallTree(t *testing.T, rc *otlpReceiver) string {
	t.Helper()
	call := rc.callIn(otlpClientTrace)
	if call == nil {
		t.Fatalf("no call span in the client's trace %s", otlpClientTrace)
	}
	if got := hex.EncodeToString(call.ParentSpanId); got != otlpClientSpan {
		t.Errorf("the queued call's span has parent %s; want the client's span %s", got, otlpClientSpan)
	}
	children := rc.children(call)
	failed := attr(children[0], "gen_ai.provider.name")
	answered := map[string]string{"first": "second", "second": "first"}[failed]
	attempt := "chat gpt-4o-mini"
	want := []treeStep{{name: "admission"}, {attempt, failed, "503"}, {attempt, failed, "503"},
		{name: "admission"}, {attempt, answered, "429"}, {attempt, answered, "200"}, {name: "settlement"}}
	if diff := cmp.Diff(tree(children), want, cmp.AllowUnexported(treeStep{})); answered == "" || diff != "" {
		t.Fatalf("the queued call's children, first admitted to %q (-got +want):\n%s", failed, diff)
	}
	checkCallSpan(t, call, answered)
	if waits := rc.children(children[0]); len(waits) != 1 || waits[0].Name != "queue" {
		t.Errorf("the queued call's first admission has children %v; want its wait in the queue", tree(waits))
	}
	if attr(children[0], "sluice.queue.wait_ms") == "" {
		t.Error("the queued call's first admission has no sluice.queue.wait_ms")
	}
	for i, c := range children[1:] {
		if c.StartTimeUnixNano < children[i].EndTimeUnixNano {
			t.Errorf("%s (child %d) began before %s (child %d) ended", c.Name, i+1, children[i].Name, i)
		}
	}
	for _, c := range children {
		if c.Kind == tracepb.Span_SPAN_KIND_CLIENT && attr(c, "http.response.status_code") != "200" && attr(c, "error.type") == "" {
			t.Errorf("the failed attempt at %s has no error.type", attr(c, "gen_ai.provider.name"))
		}
	}
	return answered
}

// checkStreamTree checks the stream's span: a new trace, its admission, its one attempt at the
// third provider and its settlement.
func checkStreamTree(t *testing.T, rc *otlpReceiver) {
	t.Helper()
	var stream *tracepb.Span
	for _, call := range rc.callSpans() {
		if attr(call, "gen_ai.request.model") == "gpt-4o" {
			stream = call
		}
	}
	if stream == nil {
		t.Fatal("no call span of the stream of gpt-4o")
	}
	if len(stream.ParentSpanId) != 0 || hex.EncodeToString(stream.TraceId) == otlpClientTrace {
		t.Errorf("the stream, sent without a traceparent, is in trace %x under %x; want a trace of its own", stream.TraceId, stream.ParentSpanId)
	}
	want := []treeStep{{name: "admission"}, {"chat gpt-4o", "third", "200"}, {name: "settlement"}}
	if diff := cmp.Diff(tree(rc.children(stream)), want, cmp.AllowUnexported(treeStep{})); diff != "" {
		t.Errorf("the stream's children (-got +want):\n%s", diff)
	}
	for k, v := range map[string]string{"gen_ai.provider.name": "third", "gen_ai.request.max_tokens": "10", "sluice.outcome": "ok",
		"gen_ai.usage.input_tokens": fmt.Sprint(upstreamPrompt), "gen_ai.usage.output_tokens": fmt.Sprint(upstreamCompletion)} {
		if got := attr(stream, k); got != v {
			t.Errorf("the stream's span has %s = %q; want %q", k, got, v)
		}
	}
}

// checkCallSpan checks the attributes of the queued call's span, answered by provider: the GenAI
// conventions' and Sluice's own.
func checkCallSpan(t *testing.T, call *tracepb.Span, provider string) {
	t.Helper()
	want := map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": provider,
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
}

// checkProviderTraceparents checks that the client's trace reached the pool's providers, and that
// every traceparent they received names an attempt span the gateway exported.
func checkProviderTraceparents(t *testing.T, rc *otlpReceiver, p *scriptedProvider) {
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
		for _, secret := range []string{keyAlice, providerKey, "Say hello", "Hello there", "hold acme"} {
			if strings.Contains(v, secret) {
				t.Errorf("an exported attribute, %s, holds %q", v, secret)
			}
		}
	}
}

// checkGenAIMetrics checks that the GenAI conventions' metrics counted both calls, each at the
// provider that answered it (answered, for the queued call) with its input and output tokens,
// and the stream's first chunk.
func checkGenAIMetrics(t *testing.T, g *gateway, answered string) {
	t.Helper()
	resp, err := adminGet(g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	queued := `gen_ai_operation_name="chat",gen_ai_provider_name="` + answered + `",gen_ai_request_model="gpt-4o-mini"`
	third := `gen_ai_operation_name="chat",gen_ai_provider_name="third",gen_ai_request_model="gpt-4o"`
	for _, series := range []string{
		`gen_ai_client_operation_duration_seconds_count{error_type="",` + queued + `} 1`,
		`gen_ai_client_token_usage_sum{` + queued + `,gen_ai_token_type="input"} ` + fmt.Sprint(upstreamPrompt),
		`gen_ai_client_token_usage_sum{` + queued + `,gen_ai_token_type="output"} ` + fmt.Sprint(upstreamCompletion),
		`gen_ai_client_operation_duration_seconds_count{error_type="",` + third + `} 1`,
		`gen_ai_client_operation_time_to_first_chunk_seconds_count{` + third + `} 1`,
		`gen_ai_client_token_usage_sum{` + third + `,gen_ai_token_type="output"} ` + fmt.Sprint(upstreamCompletion),
	} {
		if !strings.Contains(string(page), series) {
			t.Errorf("/metrics has no line %s", series)
		}
	}
}
