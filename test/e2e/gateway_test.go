// Package e2e runs Sluice's binaries as processes, the way a cluster or a person would, against
// real servers on loopback.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// client bounds every call a test makes, so a stuck gateway fails the test instead of hanging it.
var client = &http.Client{Timeout: time.Minute}

// processWait bounds each wait for a process a test started to get somewhere: ready, reloaded,
// done with a job. Waits on an autoscaler take settle.
const processWait = 20 * time.Second

// gatewayBin, labBin, adapterBin and managerBin are the binaries built once for the package's tests.
var gatewayBin, labBin, adapterBin, managerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if !testing.Short() {
			dir, err := os.MkdirTemp("", "sluice-e2e")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			bins, err := proc.Build(dir, "gateway", "lab", "metrics-adapter", "manager")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			gatewayBin, labBin, adapterBin, managerBin = bins[0], bins[1], bins[2], bins[3]
		}
		return m.Run()
	}()
	os.Exit(code)
}

// upstream is a small OpenAI-style provider: JSON and SSE answers with a fixed usage of 7 prompt
// and 3 completion tokens, whatever was asked.
type upstream struct {
	*httptest.Server
	calls    atomic.Int64
	mu       sync.Mutex
	lastAuth string
	lastBody map[string]any
}

const upstreamPrompt, upstreamCompletion = 7, 3

// upstreamRequestID is the id the stub provider gives every answer; the client sees it in place
// of the gateway's own.
const upstreamRequestID = "req_from_the_provider"

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	u.mu.Lock()
	u.lastAuth, u.lastBody = r.Header.Get("Authorization"), body
	u.mu.Unlock()
	w.Header().Set("X-Ratelimit-Remaining-Requests", "999") // the provider's own view; the gateway replaces it
	w.Header().Set("X-Request-Id", upstreamRequestID)
	usage := map[string]int{"prompt_tokens": upstreamPrompt, "completion_tokens": upstreamCompletion, "total_tokens": upstreamPrompt + upstreamCompletion}
	if stream, _ := body["stream"].(bool); stream {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, word := range []string{"Hello", " there", "!"} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", word)
			w.(http.Flusher).Flush()
		}
		if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] == true {
			u, _ := json.Marshal(usage)
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":%s}\n\n", u)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if lastContent(body) == cutOff {
		cutAnswer(w)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "Hello there!"}}},
		"usage":   usage,
	})
}

// cutOff is the message the stub provider answers by announcing a body and breaking the
// connection before it ends.
const cutOff = "cut the answer off"

// lastContent is the content of a chat body's last message, or "".
func lastContent(body map[string]any) string {
	messages, _ := body["messages"].([]any)
	if len(messages) == 0 {
		return ""
	}
	m, _ := messages[len(messages)-1].(map[string]any)
	content, _ := m["content"].(string)
	return content
}

// cutAnswer announces a 1,000-byte answer, sends 20 bytes of it, and closes the connection.
func cutAnswer(w http.ResponseWriter) {
	w.Header().Set("Content-Length", "1000")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"id":"c1","object":`)
	w.(http.Flusher).Flush()
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

func (u *upstream) last() (string, map[string]any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastAuth, u.lastBody
}

// The keys of the test configuration's users.
const (
	keyAlice    = "sk-acme-alice"
	keyCarol    = "sk-acme-carol"
	keyBob      = "sk-globex-bob"
	keyDave     = "sk-acme-dave"
	providerKey = "sk-provider-secret"
)

// writeConfig writes the gateway configuration: tenant acme on provider "stub" (and the
// unreachable "down"), tenant globex on provider "other" only.
func writeConfig(t *testing.T, dir, upstreamURL string, extraUsers ...string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "provider.key"), []byte(providerKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	acmeKeys := fmt.Sprintf("      - {sha256: %s, user: alice}\n      - {sha256: %s, user: carol}\n", gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyCarol))
	for _, u := range extraUsers {
		acmeKeys += fmt.Sprintf("      - {sha256: %s, user: %s}\n", gatewayv1.HashKey("sk-acme-"+u), u)
	}
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
server:
  maxBodyBytes: 4096
providers:
  - name: stub
    baseURL: %[1]s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 50}
    requestsPerMinute: 1000
    tokensPerMinute: 1000000
    maxInFlight: 10
    prices: {inputPerMillion: "3.00", outputPerMillion: "15.00"}
  - name: down
    baseURL: http://127.0.0.1:1/v1
    models:
      - {name: down-model}
  - name: other
    baseURL: %[1]s/v1
    models:
      - {name: other-model}
tenants:
  - name: acme
    keys:
%[2]s    providers: [stub, down]
    perUser:
      - {dimension: requests, amount: 5, per: day}
    perTenant:
      - {dimension: tokens, amount: 100000, per: day}
    budget: {amount: "10", period: month}
  - name: globex
    keys:
      - {sha256: %[3]s, user: bob}
    providers: [other]
`, upstreamURL, acmeKeys, gatewayv1.HashKey(keyBob))
	path := filepath.Join(dir, "sluice.yaml")
	writeAtomically(t, path, cfg)
	return path
}

// writeKeyedConfig writes a configuration file, cfg, in a directory of its own beside the stub
// provider's key file, provider.key, and returns its path.
func writeKeyedConfig(t *testing.T, cfg string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "provider.key"), []byte(providerKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sluice.yaml")
	writeAtomically(t, path, cfg)
	return path
}

// writeAtomically replaces a file the way an editor or Kubernetes does: write aside, rename.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// gateway is a running gateway process.
type gateway struct {
	api, admin string
	proc       *proc.Process
}

func startGateway(t *testing.T, config string) *gateway {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the gateway binary; skipped with -short")
	}
	return startGatewayOn(t, config, freeAddr(t), freeAddr(t))
}

// startGatewayOn runs the gateway on a configuration with the API and admin addresses given, and
// waits until it is ready.
func startGatewayOn(t *testing.T, config, api, admin string) *gateway {
	t.Helper()
	g := &gateway{api: "http://" + api, admin: "http://" + admin, proc: startGatewayProcess(t, config, api, admin)}
	poll.Until(t, processWait, "the gateway to be ready", func() bool {
		resp, err := http.Get(g.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// startGatewayProcess runs the gateway on a configuration with the API and admin addresses given.
// Its admin endpoints ask for adminToken, as in a cluster: the manager and the adapter the tests
// run beside it must send it.
func startGatewayProcess(t *testing.T, config, api, admin string) *proc.Process {
	t.Helper()
	cmd := exec.Command(gatewayBin, "--config", config, "--name", "gw-test", "--listen", api, "--admin-listen", admin,
		"--admin-token-file", adminTokenFile(t))
	return proc.Start(t, "gateway", cmd)
}

// adminToken is the token the gateways the tests run ask of their admin port's callers.
const adminToken = "e2e-admin-token"

// adminTokenFile writes adminToken into a file, as the kubelet mounts a Secret's key, and returns
// its path.
func adminTokenFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(path, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// adminGet gets url from a gateway's admin port with the admin token.
func adminGet(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return http.DefaultClient.Do(req)
}

// freeAddr is a loopback address free now that no earlier call gave: the kernel may hand a port
// closed a moment ago out again, and two of a test's processes must not be told the same one.
func freeAddr(t *testing.T) string {
	givenAddrs.mu.Lock()
	defer givenAddrs.mu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !givenAddrs.seen[addr] {
			givenAddrs.seen[addr] = true
			return addr
		}
	}
}

// givenAddrs are the addresses freeAddr gave.
var givenAddrs = struct {
	mu   sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

// answer is a gateway's answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post sends a call and returns its answer. It may run on another goroutine than the test's: a
// failure to send is an error of the test, and a zero answer.
func (g *gateway) post(t *testing.T, path, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.api+path, strings.NewReader(body))
	if err != nil {
		t.Errorf("POST %s: %v", path, err)
		return answer{}
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", path, err)
		return answer{}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("POST %s: read the answer: %v", path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

func (a answer) int(t *testing.T, header string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(a.header.Get(header), 10, 64)
	if err != nil {
		t.Fatalf("header %s = %q: %v (status %d, body %s)", header, a.header.Get(header), err, a.status, a.body)
	}
	return n
}

// errorCode returns the code of an OpenAI error body, failing the test for any other body.
func (a answer) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct {
			Message, Type, Code string
		}
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("answer %d is not an OpenAI error body: %s", a.status, a.body)
	}
	return e.Error.Code
}

const chatBody = `{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"Say hello."}]}`

// chatEstimate is what the gateway charges chatBody before the call: its 100 max_tokens and a
// prompt of 10 tokens in o200k_base, counted as OpenAI's cookbook counts a chat: 3 framing the
// message, 1 for the role "user", 3 for "Say hello." ("Say", " hello", ".") and 3 priming the
// reply.
const chatEstimate = 10 + 100

// checkFirstCallHeaders checks the limits a gateway on writeConfig's configuration reports on
// alice's first chatBody call, sent at sent and answered at answered: the tightest are her 5
// requests a day and acme's 100,000 tokens a day, each less this call, and acme's $10 budget less
// the call's estimate, whole again on the first of next month in UTC.
func checkFirstCallHeaders(t *testing.T, h http.Header, sent, answered time.Time) {
	t.Helper()
	want := map[string]string{
		"X-Ratelimit-Limit-Requests":     "5",
		"X-Ratelimit-Remaining-Requests": "4", // the user's, not the provider's own 999
		"X-Ratelimit-Limit-Tokens":       "100000",
		"X-Ratelimit-Remaining-Tokens":   strconv.Itoa(100000 - chatEstimate),
		"X-Sluice-Budget-Remaining":      "9.99847", // $10 less 10 tokens at $3/M and 100 at $15/M
	}
	got := make(map[string]string, len(want))
	for name := range want {
		got[name] = h.Get(name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limit headers (-want +got):\n%s", diff)
	}
	for _, name := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if d, err := time.ParseDuration(h.Get(name)); err != nil || d <= 0 || d > 24*time.Hour {
			t.Errorf("%s = %q; want a duration up to the end of the day", name, h.Get(name))
		}
	}
	// The gateway adds the time left to the moment it writes the header, just after it decides,
	// and writes whole seconds: the reset may be late by no more than the call took.
	reset, err := time.Parse(time.RFC3339, h.Get("X-Sluice-Budget-Reset"))
	if earliest, latest := firstOfNextMonth(sent), firstOfNextMonth(answered).Add(answered.Sub(sent)); err != nil || reset.Before(earliest) || reset.After(latest) {
		t.Errorf("X-Sluice-Budget-Reset = %q; want the first of next month, %s", h.Get("X-Sluice-Budget-Reset"), earliest.Format(time.RFC3339))
	}
}

// firstOfNextMonth is midnight UTC on the first of the month after now's.
func firstOfNextMonth(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

func TestGatewayForwardsAndSettles(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))

	before := time.Now()
	first := g.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if first.status != http.StatusOK {
		t.Fatalf("chat completion: %d %s", first.status, first.body)
	}
	checkFirstCallHeaders(t, first.header, before, time.Now())
	auth, sent := up.last()
	if auth != "Bearer "+providerKey {
		t.Errorf("the provider received Authorization %q; want the provider's key", auth)
	}
	if sent["model"] != "gpt-4o-mini" {
		t.Errorf("the provider received %v; want the client's body", sent)
	}

	// The first call was charged its estimate and settled at the provider's usage: the second,
	// identical call sees what the first really cost.
	second := g.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if got, want := second.int(t, "X-Ratelimit-Remaining-Tokens"), int64(100000-(upstreamPrompt+upstreamCompletion)-chatEstimate); got != want {
		t.Errorf("after settling, x-ratelimit-remaining-tokens = %d; want %d (100000 - %d actual - %d estimated)", got, want, upstreamPrompt+upstreamCompletion, chatEstimate)
	}

	// Spend is settled at the provider's prices: 7 x $3/M + 3 x $15/M = $0.000066 a call.
	poll.Until(t, processWait, "the usage snapshot to show two settled calls", func() bool {
		return g.usage(t).Tenants[0].SpendThisPeriod == "0.000132"
	})
}

func TestGatewayStreamsWithUsage(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))

	before := g.post(t, "/v1/chat/completions", keyAlice, chatBody).int(t, "X-Ratelimit-Remaining-Tokens")
	stream := g.post(t, "/v1/chat/completions", keyAlice, `{"model":"gpt-4o-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"Say hello."}]}`)
	if stream.status != http.StatusOK || !strings.HasPrefix(stream.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s %s", stream.status, stream.header.Get("Content-Type"), stream.body)
	}
	_, sent := up.last()
	if opts, _ := sent["stream_options"].(map[string]any); opts["include_usage"] != true {
		t.Errorf("the provider was not asked for the final usage chunk: stream_options = %v", sent["stream_options"])
	}
	var content strings.Builder
	events := 0
	for line := range strings.Lines(string(stream.body)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		events++
		var chunk struct {
			Choices []struct{ Delta struct{ Content string } }
			Usage   any
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if chunk.Usage != nil || len(chunk.Choices) == 0 {
			t.Errorf("the client received the usage chunk it did not ask for: %s", data)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	if content.String() != "Hello there!" || events != 3 {
		t.Errorf("streamed %d events saying %q; want 3 saying %q", events, content.String(), "Hello there!")
	}
	after := g.post(t, "/v1/chat/completions", keyAlice, chatBody).int(t, "X-Ratelimit-Remaining-Tokens")
	// Between the two plain calls: the first settled (-10 relative to its estimate) and the stream
	// settled from its usage chunk (-10); the last call's own estimate is the same as the first's.
	if got, want := before-after, int64(2*(upstreamPrompt+upstreamCompletion)); got != want {
		t.Errorf("tokens taken between the calls = %d; want %d (two calls settled at %d each)", got, want, upstreamPrompt+upstreamCompletion)
	}
}

func TestGatewayRefusesHonestly(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))
	for i := range 5 {
		if a := g.post(t, "/v1/chat/completions", keyCarol, chatBody); a.status != http.StatusOK {
			t.Fatalf("call %d of 5 allowed a day: %d %s", i+1, a.status, a.body)
		}
	}
	calls := up.calls.Load()
	refused := g.post(t, "/v1/chat/completions", keyCarol, chatBody)
	// A day's quota spent: OpenAI's insufficient_quota, which the SDKs raise at once when told
	// not to retry, instead of sleeping until the reset.
	if refused.status != http.StatusTooManyRequests || refused.errorCode(t) != "insufficient_quota" {
		t.Fatalf("sixth call: %d %s; want 429 insufficient_quota", refused.status, refused.body)
	}
	if retry := refused.int(t, "Retry-After"); retry < 1 || retry > 24*3600 {
		t.Errorf("Retry-After = %d s; want the time until the day's quota resets", retry)
	}
	if got := refused.header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("x-should-retry = %q on a spent quota; want false", got)
	}
	if got := refused.header.Get("X-Ratelimit-Remaining-Requests"); got != "0" {
		t.Errorf("x-ratelimit-remaining-requests = %q on a refusal; want 0", got)
	}
	if up.calls.Load() != calls {
		t.Error("a refused call reached the provider")
	}
	// Another user of the same tenant is not affected by carol's quota.
	if a := g.post(t, "/v1/chat/completions", keyAlice, chatBody); a.status != http.StatusOK {
		t.Errorf("alice after carol's refusal: %d %s", a.status, a.body)
	}
}

func TestGatewayRefusesBadInputForFree(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))
	cases := []struct {
		name, path, key, body string
		status                int
		code                  string
	}{
		{"malformed JSON", "/v1/chat/completions", keyAlice, `{"model":`, 400, "invalid_request"},
		{"missing model", "/v1/chat/completions", keyAlice, `{"messages":[]}`, 400, "invalid_request"},
		{"unknown model", "/v1/chat/completions", keyAlice, `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found"},
		{"no messages", "/v1/chat/completions", keyAlice, `{"model":"gpt-4o-mini","messages":[]}`, 400, "invalid_request"},
		{"max_tokens of zero", "/v1/chat/completions", keyAlice, `{"model":"gpt-4o-mini","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
		{"larger than any minute of the provider", "/v1/chat/completions", keyAlice, `{"model":"gpt-4o-mini","max_tokens":10000000,"messages":[{"role":"user","content":"hi"}]}`, 400, "request_too_large"},
		{"body over the limit", "/v1/chat/completions", keyAlice, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "request_too_large"},
		{"missing key", "/v1/chat/completions", "", chatBody, 401, "missing_api_key"},
		{"unknown key", "/v1/chat/completions", "sk-nobody", chatBody, 401, "invalid_api_key"},
		{"provider the tenant may not use", "/v1/chat/completions", keyBob, chatBody, 403, "provider_not_allowed"},
		{"unknown path", "/v1/images/generations", keyAlice, `{}`, 404, "unknown_url"},
	}
	before := g.post(t, "/v1/chat/completions", keyAlice, chatBody)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := g.post(t, tc.path, tc.key, tc.body)
			if a.status != tc.status || a.errorCode(t) != tc.code {
				t.Errorf("got %d %s; want %d with code %s", a.status, a.body, tc.status, tc.code)
			}
			if got := a.header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("x-should-retry = %q; want false: no retry changes this answer", got)
			}
			if got := a.header.Values("X-Request-Id"); len(got) != 1 || got[0] == "" {
				t.Errorf("x-request-id = %q; want one id", got)
			}
		})
	}
	if got := up.calls.Load(); got != 1 {
		t.Errorf("the provider got %d calls; want only the one good call", got)
	}
	if got := before.header.Values("X-Request-Id"); len(got) != 1 || got[0] != upstreamRequestID {
		t.Errorf("x-request-id of a forwarded call = %q; want the provider's own, %q, alone", got, upstreamRequestID)
	}
	after := g.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if got, want := after.int(t, "X-Ratelimit-Remaining-Requests"), before.int(t, "X-Ratelimit-Remaining-Requests")-1; got != want {
		t.Errorf("remaining requests after the bad ones = %d; want %d: bad input must cost nothing", got, want)
	}
}

func TestGatewayRefundsWhenTheProviderIsUnreachable(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))
	down := g.post(t, "/v1/chat/completions", keyAlice, `{"model":"down-model","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	if down.status != http.StatusBadGateway || down.errorCode(t) != "provider_unreachable" {
		t.Fatalf("unreachable provider: %d %s; want 502 provider_unreachable", down.status, down.body)
	}
	poll.Until(t, processWait, "the refund", func() bool {
		return g.usage(t).Tenants[0].SpendThisPeriod == "0"
	})
}

// TestGatewayChargesTheEstimateOfAnAnswerCutOff checks that an answer the provider cuts off before
// its announced length reaches the client as an error, not as a whole 200, and that the call stays
// charged at its estimate: the provider answered, so it billed it.
func TestGatewayChargesTheEstimateOfAnAnswerCutOff(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))
	a := g.post(t, "/v1/chat/completions", keyAlice, `{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"`+cutOff+`"}]}`)
	if a.status != http.StatusBadGateway || a.errorCode(t) != "provider_unreachable" {
		t.Fatalf("an answer cut off: %d %s; want 502 provider_unreachable", a.status, a.body)
	}
	// At least the 100 completion tokens asked for, at $15 a million.
	const leastMicros = 100 * 15
	poll.Until(t, processWait, "the call charged at its estimate", func() bool {
		spent, err := g.usage(t).Tenants[0].SpendThisPeriod.MicroDollars()
		return err == nil && spent >= leastMicros
	})
}

func TestGatewayReloadsItsConfiguration(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	config := writeConfig(t, dir, up.URL)
	g := startGateway(t, config)
	if a := g.post(t, "/v1/chat/completions", keyDave, chatBody); a.status != http.StatusUnauthorized {
		t.Fatalf("dave before the reload: %d; want 401", a.status)
	}
	writeConfig(t, dir, up.URL, "dave")
	poll.Until(t, processWait, "dave's key to work after the reload", func() bool {
		return g.post(t, "/v1/chat/completions", keyDave, chatBody).status == http.StatusOK
	})

	writeAtomically(t, config, "apiVersion: gateway.sluice.dev/v1\nkind: GatewayConfig\nproviders: [{name: \"Not A Name\"}]\n")
	poll.Until(t, processWait, "the bad file to be refused", func() bool {
		return strings.Contains(g.metrics(t), `sluice_config_reloads_total{result="failure"} 1`)
	})
	if a := g.post(t, "/v1/chat/completions", keyDave, chatBody); a.status != http.StatusOK {
		t.Errorf("dave after a bad file: %d %s; want the previous configuration still in force", a.status, a.body)
	}
}

// TestGatewayAdminPortAsksForTheToken runs a gateway with --admin-token-file: its admin
// endpoints refuse a caller without the token, and the kubelet's probes stay open.
func TestGatewayAdminPortAsksForTheToken(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, writeConfig(t, t.TempDir(), up.URL))
	for _, path := range []string{"/metrics", "/admin/usage", "/admin/queues"} {
		resp, err := http.Get(g.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without the token: %s, WWW-Authenticate %q; want 401 and a challenge", path, resp.Status, resp.Header.Get("WWW-Authenticate"))
		}
	}
	resp, err := http.Get(g.admin + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz without the token: %s; want the probe open", resp.Status)
	}
	if strings.Contains(g.proc.Log(), adminToken) {
		t.Error("the gateway's log shows the admin token")
	}
}

func (g *gateway) usage(t *testing.T) gatewayv1.Usage {
	t.Helper()
	var u gatewayv1.Usage
	g.getJSON(t, "/admin/usage", &u)
	return u
}

func (g *gateway) queues(t *testing.T) gatewayv1.Queues {
	t.Helper()
	var q gatewayv1.Queues
	g.getJSON(t, "/admin/queues", &q)
	return q
}

// getJSON decodes what the admin port serves at path into v.
func (g *gateway) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := adminGet(g.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func (g *gateway) metrics(t *testing.T) string {
	t.Helper()
	resp, err := adminGet(g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		out.WriteString(s.Text() + "\n")
	}
	return out.String()
}

// TestGatewaySendsACallAsLargeAsTheProvidersMinute runs a gateway process in front of a provider
// of 200,000 tokens a minute. A call of 150,000 tokens (its max_tokens) is more than the burst of
// the pace that spreads the provider's minute (a tenth of it) but within the minute, as the
// provider takes it: the gateway sends it. One past the whole minute is refused before it is sent.
func TestGatewaySendsACallAsLargeAsTheProvidersMinute(t *testing.T) {
	up := newUpstream(t)
	path := writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: stub
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, encoding: o200k_base}
    requestsPerMinute: 100
    tokensPerMinute: 200000
tenants:
  - name: acme
    keys:
      - {sha256: %s, user: alice}
    providers: [stub]
`, up.URL, gatewayv1.HashKey(keyAlice)))
	g := startGateway(t, path)
	large := func(maxTokens int) string {
		return fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":%d,"messages":[{"role":"user","content":"Say hello."}]}`, maxTokens)
	}
	if a := g.post(t, "/v1/chat/completions", keyAlice, large(150_000)); a.status != http.StatusOK || up.calls.Load() != 1 {
		t.Fatalf("a call of 150,000 tokens: %d %s, %d sent; want it sent and answered", a.status, a.body, up.calls.Load())
	}
	if a := g.post(t, "/v1/chat/completions", keyAlice, large(200_000)); a.status != http.StatusBadRequest || a.errorCode(t) != "request_too_large" || up.calls.Load() != 1 {
		t.Errorf("a call past the minute's 200,000 tokens: %d %s, %d sent; want 400 request_too_large, not sent", a.status, a.body, up.calls.Load())
	}
}
