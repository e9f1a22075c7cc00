package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

// The keeping provider's account: the lab's provider, whose background responses take
// keptLatency, and which bills keptFileTokens for a file a response reads, input its body does
// not show. Its prices and the gateway's are $1 a million tokens: a micro-dollar a token.
const (
	keptLatency    = 3 * time.Second
	keptFileTokens = 50000
	keptAPIKey     = "sk-lab-upstream"
	// keptFollowWait bounds the wait for background responses to be settled: their run, the
	// follower's polls (1, 2, 4 s) and, for one whose gateway died, its reclaimAfter.
	keptFollowWait = 60 * time.Second
)

// labStats is what the lab provider's /stats reports that these tests read.
type labStats struct {
	MicroDollars   int64            `json:"microDollars"`
	BatchLines     int64            `json:"batchLines"`
	BatchesRefused int64            `json:"batchesRefused"`
	Received       map[string]int64 `json:"received"`
	Responses      struct {
		BackgroundCompleted int64 `json:"backgroundCompleted"`
	} `json:"responses"`
}

// startKeepingProvider runs the lab's provider with the keeping provider's account and returns
// its URL.
func startKeepingProvider(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	proc.Start(t, "lab-provider", exec.Command(labBin, "provider", "-listen", addr, "-api-key", keptAPIKey,
		"-latency", keptLatency.String(), "-latency-stddev", "0", "-file-tokens", fmt.Sprint(keptFileTokens),
		"-input-price", "1", "-output-price", "1", "-max-in-flight", "1000", "-requests-per-minute", "1000000", "-tokens-per-minute", "1000000000"))
	url := "http://" + addr
	poll.Until(t, processWait, "the lab provider to listen", func() bool {
		resp, err := http.Get(url + "/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return url
}

func readLabStats(t *testing.T, url string) labStats {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s labStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// keptConfig writes the configuration of gateways in front of the keeping provider at url, on
// the store store (a YAML value), for two tenants: acme (keyAlice), with a month's budget that
// shows what it was charged, and globex (keyBob).
func keptConfig(t *testing.T, url, store string) string {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "provider-key")
	writeAtomically(t, keyFile, keptAPIKey)
	return writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
store: %s
kept: {reclaimAfter: 2s}
providers:
  - name: lab
    baseURL: %s/v1
    apiKeyFile: %s
    models: [{name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 100}]
    prices: {inputPerMillion: "1.00", outputPerMillion: "1.00"}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [lab]
    budget: {amount: "100.00", period: month}
  - name: globex
    keys: [{sha256: %s, user: bob}]
    providers: [lab]
`, store, url, keyFile, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyBob)))
}

// spent is what acme has been charged this month, as the store holds it.
func spent(t *testing.T, g *gateway) int64 {
	t.Helper()
	for _, u := range g.usage(t).Tenants {
		if u.Name == "acme" {
			micros, err := u.SpendThisPeriod.MicroDollars()
			if err != nil {
				t.Fatal(err)
			}
			return micros
		}
	}
	return 0
}

// responseID is the id of the response object in a.
func responseID(t *testing.T, a answer) string {
	t.Helper()
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(a.body, &r); err != nil || r.ID == "" || a.status != http.StatusOK {
		t.Fatalf("want a response object; got %d %s", a.status, a.body)
	}
	return r.ID
}

// TestWhatAProviderKeepsIsItsTenantsAndIsChargedAsBilled runs two gateways on one Redis in front
// of a provider that keeps responses and runs background ones. Another tenant's id reaches no
// provider; a background response that reads a file (input its body does not show) is charged
// what the provider billed; and one whose gateway is killed while following it is settled by the
// other gateway.
func TestWhatAProviderKeepsIsItsTenantsAndIsChargedAsBilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateways, the lab provider and Redis; skipped with -short")
	}
	redis := redisserver.Start(t)
	url := startKeepingProvider(t)
	cfg := keptConfig(t, url, fmt.Sprintf("{type: redis, redis: {address: %q, failMode: closed, replicas: 2}}", redis.Addr))
	a := startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))
	b := startGatewayOn(t, cfg, freeAddr(t), freeAddr(t))

	// A stored response of acme's, made through a: globex learns its id.
	stored := responseID(t, a.post(t, "/v1/responses", keyAlice, `{"model":"gpt-4o-mini","input":"Say hello.","max_output_tokens":20}`))
	before := readLabStats(t, url).Received
	for _, g := range []*gateway{a, b} {
		if got := g.post(t, "/v1/responses", keyBob, `{"model":"gpt-4o-mini","input":"Go on.","previous_response_id":"`+stored+`"}`); got.status != http.StatusNotFound {
			t.Errorf("globex continuing acme's response: %d %s; want 404", got.status, got.body)
		}
		if got := g.get(t, "/v1/responses/"+stored, keyBob); got.status != http.StatusNotFound {
			t.Errorf("globex reading acme's response: %d %s; want 404", got.status, got.body)
		}
	}
	if after := readLabStats(t, url).Received; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("globex's calls on acme's response reached the provider: %v before, %v after", before, after)
	}
	if got := a.get(t, "/v1/responses/"+stored, keyAlice); got.status != http.StatusOK {
		t.Errorf("acme reading its own response through a: %d %s", got.status, got.body)
	}

	// Two background responses that read a file: one followed by a, one by b, which dies.
	file := `{"model":"gpt-4o-mini","background":true,"max_output_tokens":20,"input":[{"role":"user","content":[` +
		`{"type":"input_text","text":"Summarize this."},{"type":"input_file","file_url":"https://example.com/report.pdf"}]}]}`
	responseID(t, a.post(t, "/v1/responses", keyAlice, file))
	responseID(t, b.post(t, "/v1/responses", keyAlice, file))
	b.proc.Kill()
	// And a background stream whose client leaves once it has the response's id.
	leaveAfterCreated(t, a, strings.Replace(file, `"background":true`, `"background":true,"stream":true`, 1))
	held := spent(t, a) // their estimates, while they run

	poll.Until(t, keptFollowWait, "gateway a to settle the three background responses", func() bool {
		return sample(t, a, "sluice_gateway_background_responses_ended_total", `{outcome="settled",provider="lab",tenant="acme"}`) == 3
	})
	billed := readLabStats(t, url)
	if billed.Responses.BackgroundCompleted != 3 {
		t.Errorf("the provider completed %d background responses; want 3", billed.Responses.BackgroundCompleted)
	}
	if got := spent(t, a); got != billed.MicroDollars {
		t.Errorf("acme was charged %d micro-dollars; the provider billed %d", got, billed.MicroDollars)
	}
	t.Logf("acme held $%.6f while they ran, then was charged $%.6f; the provider billed $%.6f (three background responses of %d file tokens each)",
		float64(held)/1e6, float64(spent(t, a))/1e6, float64(billed.MicroDollars)/1e6, keptFileTokens)
}

// leaveAfterCreated sends a streamed call as keyAlice and leaves once the stream has said
// response.created.
func leaveAfterCreated(t *testing.T, g *gateway, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.api+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyAlice)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "response.created") {
			return
		}
	}
	t.Fatalf("the stream ended without response.created: %v", lines.Err())
}

// get sends a GET with key and returns its answer.
func (g *gateway) get(t *testing.T, path, key string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.api+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read the answer: %v", path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// TestGoSDKRunsABackgroundResponseThroughTheGateway drives a background response with the official
// Go SDK, unmodified but for its base URL and key: created, polled to its end, streamed, resumed
// and cancelled, through one gateway in front of the keeping provider.
func TestGoSDKRunsABackgroundResponseThroughTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway and the lab provider; skipped with -short")
	}
	url := startKeepingProvider(t)
	g := startGateway(t, keptConfig(t, url, "{type: memory}"))
	ctx, cancel := context.WithTimeout(context.Background(), keptFollowWait)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(g.api+"/v1"), option.WithAPIKey(keyAlice), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "gpt-4o-mini", Background: openai.Bool(true), MaxOutputTokens: openai.Int(20),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}}

	created, err := client.Responses.New(ctx, params)
	if err != nil || created.Status != "queued" {
		t.Fatalf("create: %+v, %v; want a queued response", created, err)
	}
	polled := created
	for polled.Status == "queued" || polled.Status == "in_progress" {
		time.Sleep(500 * time.Millisecond)
		if polled, err = client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}
	if polled.Status != "completed" || polled.Usage.TotalTokens == 0 || polled.OutputText() == "" {
		t.Errorf("polled to its end: status %s, usage %+v, text %q; want completed with its usage", polled.Status, polled.Usage, polled.OutputText())
	}

	stream := client.Responses.NewStreaming(ctx, params)
	var id string
	var completed responses.Response
	for stream.Next() {
		switch e := stream.Current(); e.Type {
		case "response.created":
			id = e.AsResponseCreated().Response.ID
		case "response.completed":
			completed = e.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil || id == "" || completed.Usage.TotalTokens == 0 {
		t.Errorf("stream: id %q, completed usage %+v, %v; want response.created and response.completed", id, completed.Usage, err)
	}
	resumed := client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(0)})
	events := 0
	for resumed.Next() {
		events++
	}
	if err := resumed.Err(); err != nil || events == 0 {
		t.Errorf("resumed stream: %d events, %v; want the events after the first", events, err)
	}

	running, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatalf("create another: %v", err)
	}
	cancelled, err := client.Responses.Cancel(ctx, running.ID)
	if err != nil || cancelled.Status != "cancelled" {
		t.Errorf("cancel: %+v, %v; want cancelled", cancelled, err)
	}
	if err := client.Responses.Delete(ctx, created.ID); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}); err == nil {
		t.Errorf("a deleted response could still be read")
	}

	poll.Until(t, keptFollowWait, "the gateway to settle the cancelled background response", func() bool {
		return sample(t, g, "sluice_gateway_background_responses_ended_total", `{outcome="settled",provider="lab",tenant="acme"}`) == 2
	})
	if got, billed := spent(t, g), readLabStats(t, url).MicroDollars; got != billed {
		t.Errorf("acme was charged %d micro-dollars; the provider billed %d", got, billed)
	}
}

// nodeBackgroundResult is what testdata/node-background.js prints.
type nodeBackgroundResult struct {
	Created string
	Polled  struct {
		Status, Text string
		Total        int
	}
	OtherTenant struct {
		Status int
		Name   string
	}
	Stream struct {
		ID    string
		Total int
	}
	Cancelled string
}

// TestNodeSDKRunsABackgroundResponseThroughTheGateway drives a background response with the
// official openai npm package: created, polled to its end, refused to another tenant as the
// provider refuses an id it does not have, streamed and cancelled. It needs node and npm, and
// installs the package once under bin/ (hack/node-sdk.sh).
func TestNodeSDKRunsABackgroundResponseThroughTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway, the lab provider and node; skipped with -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node SDK cannot run (install Node.js 20 or later to run this test)", tool)
		}
	}
	modules, err := exec.Command("../../hack/node-sdk.sh").Output()
	if err != nil {
		t.Fatalf("install the openai npm package: %v", err)
	}
	url := startKeepingProvider(t)
	g := startGateway(t, keptConfig(t, url, "{type: memory}"))
	cmd := exec.Command("node", "testdata/node-background.js", g.api+"/v1", keyAlice, keyBob)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.TrimSpace(string(modules)))
	cmd.Stderr = os.Stderr
	printed, err := cmd.Output()
	if err != nil {
		t.Fatalf("node-background.js: %v", err)
	}
	var got nodeBackgroundResult
	if err := json.Unmarshal(printed, &got); err != nil {
		t.Fatalf("node-background.js printed %s: %v", printed, err)
	}
	if got.Created != "queued" || got.Polled.Status != "completed" || got.Polled.Total == 0 || got.Polled.Text == "" {
		t.Errorf("created %q, polled %+v; want queued, then completed with its usage and text", got.Created, got.Polled)
	}
	if got.OtherTenant.Status != http.StatusNotFound || got.OtherTenant.Name != "NotFoundError" {
		t.Errorf("another tenant reading it: %+v; want 404, raised as NotFoundError", got.OtherTenant)
	}
	if got.Stream.ID == "" || got.Stream.Total == 0 || got.Cancelled != "cancelled" {
		t.Errorf("stream %+v, cancel %q; want a streamed response to its usage, and a cancelled one", got.Stream, got.Cancelled)
	}
	poll.Until(t, keptFollowWait, "the gateway to settle the background responses", func() bool {
		return sample(t, g, "sluice_gateway_background_responses_ended_total", `{outcome="settled",provider="lab",tenant="acme"}`) >= 2
	})
}
