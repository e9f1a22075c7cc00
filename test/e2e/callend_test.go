package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
)

// The messages that tell endProvider how to answer.
const (
	streamForever = "stream for ever"
	streamLinger  = "stream, then linger"
	lieAboutUsage = "lie about usage"
	overflowUsage = "overflow usage"
	throttleCall  = "throttle the call"
	refuseCall    = "refuse the call as bad"
)

// endProvider is a provider that answers as its call's last message asks: an endless stream, a
// stream whose body lingers after its [DONE], usage it could not have used, a throttle, a 400, or
// a plain answer with usage. It counts the streams it has stopped sending.
type endProvider struct {
	*httptest.Server
	streamsEnded atomic.Int64
}

// foreverBound bounds an endless stream, so that a gateway that never stops reading it fails
// the test rather than hanging it.
const foreverBound = 2 << 30

func newEndProvider(t *testing.T) *endProvider {
	p := &endProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *endProvider) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	switch lastContent(body) {
	case streamForever:
		defer p.streamsEnded.Add(1)
		streamUntilGone(w, r)
	case streamLinger:
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, streamWords("Hello", " there")+usageChunk(7, 2)+"data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select { // the body ends a moment after [DONE], as a provider's may
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	case lieAboutUsage:
		answerWithUsage(w, 1e18, 1e18)
	case overflowUsage:
		answerWithUsage(w, math.MaxInt64, math.MaxInt64)
	case throttleCall:
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"Rate limit reached.","type":"requests","code":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
	case refuseCall:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"Invalid 'messages[0].content'.","type":"invalid_request_error","param":"messages[0].content","code":null}}`)
	default:
		answerWithUsage(w, 7, 3)
	}
}

// streamUntilGone streams a chunk of text and 16 KiB of SSE comment, again and again, until the
// gateway hangs up or foreverBound bytes have gone.
func streamUntilGone(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	piece := streamWords("word ") + ": " + strings.Repeat("p", 16<<10) + "\n\n"
	for sent := 0; sent < foreverBound && r.Context().Err() == nil; sent += len(piece) {
		if _, err := io.WriteString(w, piece); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// streamWords is a chat stream's chunks, one for each word.
func streamWords(words ...string) string {
	var b strings.Builder
	for _, word := range words {
		fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", word)
	}
	return b.String()
}

func usageChunk(prompt, completion int64) string {
	return fmt.Sprintf("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\n", prompt, completion)
}

func answerWithUsage(w http.ResponseWriter, prompt, completion int64) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hi."}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`, prompt, completion)
}

// endConfig writes a configuration of two tenants, acme (keyAlice) and globex (keyBob), on the
// one provider at url, with the server section given. acme has a month's budget of $10.
func endConfig(t *testing.T, url, server string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
%s
providers:
  - name: stub
    baseURL: %s/v1
    models: [{name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 50}]
    maxInFlight: 100
    retry: {maxAttempts: 1}
    prices: {inputPerMillion: "3.00", outputPerMillion: "15.00"}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [stub]
    budget: {amount: "10", period: month}
  - name: globex
    keys: [{sha256: %s, user: bob}]
    providers: [stub]
`, server, url, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyBob))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// chatSaying is a chat call whose one message is content, capped at 5 tokens.
func chatSaying(content string, stream bool) string {
	return fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":5,"stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, content)
}

// openUnread sends a call on a connection of its own and never reads the answer: a client that
// stopped reading and keeps its socket open. The connection closes as the test ends.
func openUnread(t *testing.T, g *gateway, key, body string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		key, len(body), body)
}

// sample is the value of the gateway's metric name with exactly these labels, in the exposition's
// order; 0 when absent.
func sample(t *testing.T, g *gateway, name, labels string) float64 {
	t.Helper()
	for line := range strings.Lines(g.metrics(t)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), name+labels+" "); ok {
			v, _ := strconv.ParseFloat(value, 64)
			return v
		}
	}
	return 0
}

// outcomes is how many calls of acme's on the stub provider the gateway counted under outcome.
func outcomes(t *testing.T, g *gateway, tenant, outcome string) float64 {
	return sample(t, g, "sluice_gateway_requests_total", fmt.Sprintf(`{outcome=%q,provider="stub",tenant=%q}`, outcome, tenant))
}

// providerInFlight is how many calls the gateway holds in flight at the stub provider.
func providerInFlight(t *testing.T, g *gateway) int64 {
	for _, p := range g.usage(t).Providers {
		if p.Name == "stub" {
			return p.InFlight
		}
	}
	return -1
}

// TestAClientThatStopsReadingIsCutOffAndHoldsNothing opens three endless streams whose clients
// never read and keep their sockets open. Each write to them has server.writeTimeout: once their
// buffers are full, each is cut off, counted client_too_slow, its provider's connection closed,
// and its slots in flight given back, while the sockets stay open.
func TestAClientThatStopsReadingIsCutOffAndHoldsNothing(t *testing.T) {
	p := newEndProvider(t)
	g := startGateway(t, endConfig(t, p.URL, "server:\n  writeTimeout: 1s\n"))
	for range 3 {
		openUnread(t, g, keyAlice, chatSaying(streamForever, true))
	}
	poll.Until(t, time.Minute, "the three clients that stopped reading to be cut off", func() bool {
		return outcomes(t, g, "acme", "client_too_slow") == 3
	})
	poll.Until(t, 10*time.Second, "the provider's three streams to be closed", func() bool { return p.streamsEnded.Load() == 3 })
	if n := providerInFlight(t, g); n != 0 {
		t.Errorf("%d calls in flight at the provider after the clients were cut off; want 0", n)
	}
	if n := metricValue(t, g, "sluice_gateway_calls_in_flight"); n != 0 {
		t.Errorf("the gateway holds %v calls after the clients were cut off; want 0", n)
	}
	if a := g.post(t, "/v1/chat/completions", keyBob, chatSaying("Hello.", false)); a.status != http.StatusOK {
		t.Errorf("another tenant's call: %d %s; want 200", a.status, a.body)
	}
}

// TestClientsThatStopReadingDoNotHoldTheGateway sends twenty streams whose clients stopped
// reading from one tenant to a gateway of server.maxInFlight 20: it holds no more than its share
// of them, another tenant's call is served, and every stream it held is cut off at
// server.writeTimeout while their sockets stay open.
func TestClientsThatStopReadingDoNotHoldTheGateway(t *testing.T) {
	p := newEndProvider(t)
	g := startGateway(t, endConfig(t, p.URL, "server:\n  writeTimeout: 1s\n  maxConnections: 64\n  maxInFlight: 20\n"))
	for range 20 {
		openUnread(t, g, keyAlice, chatSaying(streamForever, true))
	}
	overloaded := func() float64 { return sample(t, g, "sluice_gateway_overloaded_total", `{tenant="acme"}`) }
	poll.Until(t, time.Minute, "the gateway to answer the twenty streams", func() bool {
		return metricValue(t, g, "sluice_gateway_calls_in_flight")+outcomes(t, g, "acme", "client_too_slow")+overloaded() == 20
	})
	poll.Until(t, time.Minute, "another tenant's call to be served", func() bool {
		return g.post(t, "/v1/chat/completions", keyBob, chatSaying("Hello.", false)).status == http.StatusOK
	})
	poll.Until(t, time.Minute, "every stream the gateway held to be cut off", func() bool {
		return outcomes(t, g, "acme", "client_too_slow") == 20-overloaded()
	})
	if n := metricValue(t, g, "sluice_gateway_calls_in_flight"); n != 0 {
		t.Errorf("the gateway holds %v calls once the streams were cut off; want 0", n)
	}
}

// TestAStreamReadToItsDoneIsServed reads a stream to its [DONE] and hangs up there, as the
// OpenAI SDKs do, while the provider's body goes on a moment longer: the call is counted ok and
// charged the usage its provider reported, not taken for a client that left.
func TestAStreamReadToItsDoneIsServed(t *testing.T) {
	p := newEndProvider(t)
	g := startGateway(t, endConfig(t, p.URL, ""))
	body := chatSaying(streamLinger, true)
	req, err := http.NewRequest(http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyAlice)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && lines.Text() != "data: [DONE]" {
	}
	resp.Body.Close() // at [DONE]: the provider's body has not ended yet
	poll.Until(t, 30*time.Second, "the stream to be counted", func() bool {
		return outcomes(t, g, "acme", "ok")+outcomes(t, g, "acme", "client_closed") == 1
	})
	if n := outcomes(t, g, "acme", "client_closed"); n != 0 {
		t.Errorf("a stream read to its [DONE] was counted client_closed; want ok")
	}
	line := accessLine(t, g, resp.Header.Get("X-Request-Id"))
	if line["outcome"] != "ok" || line["prompt_tokens"] != 7.0 || line["completion_tokens"] != 2.0 {
		t.Errorf("access-log line %v; want outcome ok, charged the 7 and 2 tokens the provider reported", line)
	}
}

// TestAProviderThatLiesAboutUsageIsChargedItsBound has the provider report usage of 10^18
// tokens, and usage whose sum overflows int64, on calls capped at 5 tokens, then throttle one:
// each is charged at most what the call could have used, counted, and the tenant's later calls
// are served as before.
func TestAProviderThatLiesAboutUsageIsChargedItsBound(t *testing.T) {
	p := newEndProvider(t)
	g := startGateway(t, endConfig(t, p.URL, ""))
	for _, lie := range []string{lieAboutUsage, overflowUsage, lieAboutUsage, overflowUsage, lieAboutUsage} {
		if a := g.post(t, "/v1/chat/completions", keyAlice, chatSaying(lie, false)); a.status != http.StatusOK {
			t.Fatalf("%s: %d %s; want 200", lie, a.status, a.body)
		}
	}
	if a := g.post(t, "/v1/chat/completions", keyAlice, chatSaying(throttleCall, false)); a.status != http.StatusTooManyRequests {
		t.Errorf("a throttled call: %d %s; want the provider's 429", a.status, a.body)
	}
	poll.Until(t, 30*time.Second, "the provider's pause to end and a call to be served", func() bool {
		return g.post(t, "/v1/chat/completions", keyAlice, chatSaying("Hello.", false)).status == http.StatusOK
	})
	if n := sample(t, g, "sluice_gateway_usage_out_of_bounds_total", `{provider="stub"}`); n != 5 {
		t.Errorf("%v answers counted past their bounds; want 5", n)
	}
	// Each call is at most 5 completion tokens at $15 a million and a prompt of at most a token a
	// byte of its body (about 120) at $3: under $0.0005 each, where 10^18 tokens would spend the
	// month's $10 many times over.
	a := g.post(t, "/v1/chat/completions", keyAlice, chatSaying("Hello.", false))
	left, err := strconv.ParseFloat(a.header.Get("X-Sluice-Budget-Remaining"), 64)
	if err != nil || left < 9.99 {
		t.Errorf("budget left %q after six lies; want more than $9.99 of $10", a.header.Get("X-Sluice-Budget-Remaining"))
	}
}

// TestAProvidersBadRequestIsTheCallers has the provider refuse a call as bad: the client gets its
// answer with x-should-retry: false, which the SDKs obey, and it is counted bad_request, not a
// provider error.
func TestAProvidersBadRequestIsTheCallers(t *testing.T) {
	p := newEndProvider(t)
	g := startGateway(t, endConfig(t, p.URL, ""))
	a := g.post(t, "/v1/chat/completions", keyAlice, chatSaying(refuseCall, false))
	if a.status != http.StatusBadRequest || a.header.Get("X-Should-Retry") != "false" {
		t.Errorf("answer %d with x-should-retry %q; want the provider's 400 with x-should-retry: false", a.status, a.header.Get("X-Should-Retry"))
	}
	if bad, failed := outcomes(t, g, "acme", "bad_request"), outcomes(t, g, "acme", "provider_error"); bad != 1 || failed != 0 {
		t.Errorf("counted %v bad_request and %v provider_error; want 1 and 0", bad, failed)
	}
}

// TestEveryCallIsLoggedOnce sends calls that end each their own way (served, streamed, refused
// for a bad key, refused by the provider) and finds, for each, one access-log line with every
// field an operator reads.
func TestEveryCallIsLoggedOnce(t *testing.T) {
	p := newEndProvider(t)
	g := startGateway(t, endConfig(t, p.URL, ""))
	calls := []struct {
		key, body, outcome string
		status             float64
	}{
		{keyAlice, chatSaying("Hello.", false), "ok", 200},
		{keyAlice, chatSaying(streamLinger, true), "ok", 200},
		{"sk-nobody", chatSaying("Hello.", false), "unauthorized", 401},
		{keyBob, chatSaying(refuseCall, false), "bad_request", 400},
	}
	fields := []string{"request_id", "tenant", "user", "endpoint", "model", "model_sent", "provider", "status", "outcome",
		"tokens_estimated", "prompt_tokens", "completion_tokens", "cost", "queued_ms", "first_byte_ms", "duration_ms"}
	for _, c := range calls {
		a := g.post(t, "/v1/chat/completions", c.key, c.body)
		line := accessLine(t, g, a.header.Get("X-Request-Id"))
		for _, f := range fields {
			if _, ok := line[f]; !ok {
				t.Errorf("access-log line %v has no %s", line, f)
			}
		}
		if line["outcome"] != c.outcome || line["status"] != c.status {
			t.Errorf("access-log line of a call answered %d: outcome %v, status %v; want %s, %v", a.status, line["outcome"], line["status"], c.outcome, c.status)
		}
	}
}

// accessLine waits for the one access-log line of the call with request id id, and fails the
// test if there is more than one.
func accessLine(t *testing.T, g *gateway, id string) map[string]any {
	t.Helper()
	var found []map[string]any
	poll.Until(t, 10*time.Second, "the call's access-log line", func() bool {
		found = nil
		for line := range strings.Lines(g.proc.Log()) {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == "call ended" && entry["request_id"] == id {
				found = append(found, entry)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		t.Errorf("%d access-log lines for the call %s; want 1: %v", len(found), id, found)
	}
	return found[0]
}
