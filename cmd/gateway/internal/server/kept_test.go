package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// The keeping provider's bill: every response's own input and output, what a file it reads adds,
// and the bound of a model whose context window the tests set.
const (
	keptInput       = 10
	keptOutput      = 20
	keptFileTokens  = 1000
	keptWindow      = 5000
	keptOtherKey    = "sk-other-bob"
	keptPollsToRun  = 2 // the polls a background response answers in progress before it completes
	keptWaitForPoll = 15 * time.Second
)

// keepingProvider keeps responses as OpenAI's API does: it stores them, continues them by
// previous_response_id (billing the earlier turns as input), runs background ones, and counts
// the calls that reach it by method and path.
type keepingProvider struct {
	*httptest.Server
	mu        sync.Mutex
	responses map[string]*keptResponseAt
	calls     map[string]int
	bodies    []string
	lastGet   string // the query and body of the last GET
}

// keptResponseAt is a response the provider keeps: its usage, and for a background one the polls
// left before it completes.
type keptResponseAt struct {
	id           string
	input        int64
	pollsLeft    int
	background   bool
	inputPlusOut int64
}

func newKeepingProvider(t *testing.T) *keepingProvider {
	p := &keepingProvider{responses: map[string]*keptResponseAt{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", p.create)
	mux.HandleFunc("GET /v1/responses/{id}", p.get)
	mux.HandleFunc("DELETE /v1/responses/{id}", p.delete)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.calls[r.Method+" "+r.URL.Path]++
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *keepingProvider) count(call string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[call]
}

func (p *keepingProvider) create(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Background bool   `json:"background"`
		Previous   string `json:"previous_response_id"`
		Store      *bool  `json:"store"`
	}
	json.Unmarshal(raw, &body)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bodies = append(p.bodies, string(raw))
	input := int64(keptInput)
	if body.Previous != "" {
		prev, ok := p.responses[body.Previous]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"message":"Previous response with id '%s' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, body.Previous)
			return
		}
		input += prev.inputPlusOut
	}
	if strings.Contains(string(raw), `"input_file"`) {
		input += keptFileTokens
	}
	res := &keptResponseAt{id: fmt.Sprintf("resp_%d", len(p.bodies)), input: input, background: body.Background,
		inputPlusOut: input + keptOutput}
	if body.Background {
		res.pollsLeft = keptPollsToRun
	}
	if body.Store == nil || *body.Store {
		p.responses[res.id] = res
	}
	io.WriteString(w, res.object())
}

func (p *keepingProvider) get(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastGet = r.URL.RawQuery + " " + string(body)
	res, ok := p.responses[r.PathValue("id")]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"Response with id '%s' not found.","type":"invalid_request_error","param":null,"code":null}}`, r.PathValue("id"))
		return
	}
	if res.pollsLeft > 0 {
		res.pollsLeft--
	}
	io.WriteString(w, res.object())
}

func (p *keepingProvider) delete(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := r.PathValue("id")
	delete(p.responses, id)
	fmt.Fprintf(w, `{"id":%q,"object":"response.deleted","deleted":true}`, id)
}

// object is the response as the provider answers it: queued with no usage while a background one
// runs, completed with its usage after.
func (res *keptResponseAt) object() string {
	if res.background && res.pollsLeft > 0 {
		return fmt.Sprintf(`{"id":%q,"object":"response","status":"queued","background":true,"output":[],"usage":null}`, res.id)
	}
	return fmt.Sprintf(`{"id":%q,"object":"response","status":"completed","output":[{"type":"message","id":"msg_%s","role":"assistant","content":[]}],`+
		`"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`, res.id, res.id, res.input, keptOutput, res.input+keptOutput)
}

// newKeptGateway is the settle table's gateway in front of p, with a second tenant (keptOtherKey)
// and a model whose context window is keptWindow, under its providerState state.
func newKeptGateway(t *testing.T, p *keepingProvider, state gatewayv1.ProviderState) *settleGateway {
	cfg := settleConfig(p.URL)
	cfg.Providers[0].Models[0].ContextWindow = keptWindow
	cfg.Tenants[0].ProviderState = state
	other := cfg.Tenants[0]
	other.Name, other.Keys = "other", []gatewayv1.Key{{SHA256: gatewayv1.HashKey(keptOtherKey), User: "bob"}}
	cfg.Tenants = append(cfg.Tenants, other)
	return newSettleGatewayFrom(t, cfg)
}

// send sends a call to the gateway with key and returns its status and body.
func (g *settleGateway) send(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// idOf is the id of the response object in body.
func idOf(t *testing.T, body string) string {
	t.Helper()
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.ID == "" {
		t.Fatalf("no response id in %s", body)
	}
	return r.ID
}

func TestAStoredResponseIsItsTenantsAlone(t *testing.T) {
	p := newKeepingProvider(t)
	g := newKeptGateway(t, p, gatewayv1.ProviderStateKeep)
	status, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, `{"model":"m","input":"Say hello."}`)
	if status != http.StatusOK {
		t.Fatalf("creating a response: %d %s", status, body)
	}
	id := idOf(t, body)

	for _, tc := range []struct{ method, path, body, code string }{
		{http.MethodPost, "/v1/responses", `{"model":"m","input":"And then?","previous_response_id":"` + id + `"}`, `"code":"previous_response_not_found"`},
		{http.MethodPost, "/v1/responses", `{"model":"m","input":[{"type":"item_reference","id":"msg_` + id + `"}]}`, `not found`},
		{http.MethodGet, "/v1/responses/" + id, "", `not found`},
		{http.MethodDelete, "/v1/responses/" + id, "", `not found`},
		{http.MethodPost, "/v1/responses/" + id + "/cancel", "", `not found`},
		{http.MethodGet, "/v1/responses/" + id + "/input_items", "", `not found`},
	} {
		if status, body := g.send(t, tc.method, tc.path, keptOtherKey, tc.body); status != http.StatusNotFound || !strings.Contains(body, tc.code) {
			t.Errorf("another tenant's %s %s: %d %s; want 404 holding %s", tc.method, tc.path, status, body, tc.code)
		}
	}
	if n := p.count("POST /v1/responses"); n != 1 {
		t.Errorf("the provider received %d calls to create a response; want only the owner's 1", n)
	}
	for _, call := range []string{"GET /v1/responses/" + id, "DELETE /v1/responses/" + id} {
		if n := p.count(call); n != 0 {
			t.Errorf("the provider received %s %d times from another tenant; want 0", call, n)
		}
	}

	if status, body := g.send(t, http.MethodGet, "/v1/responses/"+id, settleKey, ""); status != http.StatusOK || idOf(t, body) != id {
		t.Errorf("its owner's GET: %d %s; want the response", status, body)
	}
	if status, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, `{"model":"m","input":"And then?","previous_response_id":"`+id+`"}`); status != http.StatusOK {
		t.Errorf("its owner continuing it: %d %s", status, body)
	}
	if status, _ := g.send(t, http.MethodDelete, "/v1/responses/"+id, settleKey, ""); status != http.StatusOK {
		t.Errorf("its owner deleting it: %d", status)
	}
	if status, _ := g.send(t, http.MethodGet, "/v1/responses/"+id, settleKey, ""); status != http.StatusNotFound {
		t.Errorf("its owner reading it once deleted: %d; want 404", status)
	}
}

func TestACallThatContinuesAResponseIsEstimatedWithItsEarlierTurns(t *testing.T) {
	p := newKeepingProvider(t)
	g := newKeptGateway(t, p, gatewayv1.ProviderStateKeep)
	_, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, `{"model":"m","input":"Say hello."}`)
	id := idOf(t, body)
	alone, apiErr := g.newCall(t.Context(), g.policy, g.policy.Caller(settleKey), "responses", []byte(`{"model":"m","input":"And then?"}`))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	continued, apiErr := g.newCall(t.Context(), g.policy, g.policy.Caller(settleKey), "responses", []byte(`{"model":"m","input":"And then?","previous_response_id":"`+id+`"}`))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	if got, want := continued.estimate.PromptTokens-alone.estimate.PromptTokens, int64(keptInput+keptOutput); got != want {
		t.Errorf("continuing a response adds %d prompt tokens to the estimate; want its input and output, %d", got, want)
	}
}

func TestABackgroundResponseIsChargedWhatItsProviderBilled(t *testing.T) {
	p := newKeepingProvider(t)
	g := newKeptGateway(t, p, gatewayv1.ProviderStateKeep)
	// A file the provider reads: input the body does not show.
	status, body := g.send(t, http.MethodPost, "/v1/responses", settleKey,
		`{"model":"m","background":true,"max_output_tokens":50,"input":[{"role":"user","content":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`)
	if status != http.StatusOK || !strings.Contains(body, `"queued"`) {
		t.Fatalf("a background response: %d %s", status, body)
	}
	waitForBackground(t, g, "settled")
	want := charged{requests: 1, tokens: keptInput + keptFileTokens + keptOutput, micros: (keptInput+keptFileTokens)*1 + keptOutput*2}
	if got := g.charged(t); got != want {
		t.Errorf("charged %+v; want what the provider billed, %+v", got, want)
	}
}

func TestABackgroundResponseDeletedBeforeItEndsIsChargedItsBound(t *testing.T) {
	p := newKeepingProvider(t)
	g := newKeptGateway(t, p, gatewayv1.ProviderStateKeep)
	_, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, `{"model":"m","background":true,"max_output_tokens":50,"input":"Hi."}`)
	if status, _ := g.send(t, http.MethodDelete, "/v1/responses/"+idOf(t, body), settleKey, ""); status != http.StatusOK {
		t.Fatalf("deleting it: %d", status)
	}
	waitForBackground(t, g, "bound")
	want := charged{requests: 1, tokens: keptWindow + 50, micros: keptWindow*1 + 50*2}
	if got := g.charged(t); got != want {
		t.Errorf("charged %+v; want its bound, its model's context window in and its cap out, %+v", got, want)
	}
}

// waitForBackground waits, a bounded number of polls, for the gateway to count one background
// response ended with outcome.
func waitForBackground(t *testing.T, g *settleGateway, outcome string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), keptWaitForPoll)
	defer cancel()
	for testutil.ToFloat64(g.metrics.backgroundEnded.WithLabelValues("acme", "lab", outcome)) < 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("no background response ended %s", outcome)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestAPlanDecidesWhatItsCallsLeaveAtTheProvider(t *testing.T) {
	tests := []struct {
		name       string
		state      gatewayv1.ProviderState
		body       string
		wantStatus int
		wantSent   string // in the body the provider received
	}{
		{"NoStore sends a call with store false", gatewayv1.ProviderStateNoStore, `{"model":"m","input":"Hi."}`, http.StatusOK, `"store":false`},
		{"NoStore refuses a background run", gatewayv1.ProviderStateNoStore, `{"model":"m","input":"Hi.","background":true}`, http.StatusBadRequest, ""},
		{"NoStore refuses to continue a response", gatewayv1.ProviderStateNoStore, `{"model":"m","input":"Hi.","previous_response_id":"resp_1"}`, http.StatusBadRequest, ""},
		{"Refuse refuses a call that would be stored", gatewayv1.ProviderStateRefuse, `{"model":"m","input":"Hi."}`, http.StatusBadRequest, ""},
		{"Refuse takes a call with store false", gatewayv1.ProviderStateRefuse, `{"model":"m","input":"Hi.","store":false}`, http.StatusOK, `"store":false`},
		{"Keep refuses a prompt its plan does not name", gatewayv1.ProviderStateKeep, `{"model":"m","prompt":{"id":"pmpt_1"}}`, http.StatusNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newKeepingProvider(t)
			g := newKeptGateway(t, p, tc.state)
			status, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("%d %s; want %d", status, body, tc.wantStatus)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			switch {
			case tc.wantSent == "" && len(p.bodies) > 0:
				t.Errorf("the provider received %s; want nothing", p.bodies[0])
			case tc.wantSent != "" && (len(p.bodies) != 1 || !strings.Contains(p.bodies[0], tc.wantSent)):
				t.Errorf("the provider received %q; want one call holding %s", p.bodies, tc.wantSent)
			}
		})
	}
}

// TestAGETsBodyGoesToItsProviderAsItsQuery: the OpenAI Go SDK asks for a response's stream in a
// GET's JSON body; the provider receives the parameters in the query, where the API documents
// them, and a body that holds anything else is refused.
func TestAGETsBodyGoesToItsProviderAsItsQuery(t *testing.T) {
	p := newKeepingProvider(t)
	g := newKeptGateway(t, p, gatewayv1.ProviderStateKeep)
	_, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, `{"model":"m","input":"Say hello."}`)
	id := idOf(t, body)
	if status, body := g.send(t, http.MethodGet, "/v1/responses/"+id+"?include_obfuscation=false", settleKey, `{"stream":true,"starting_after":3}`); status != http.StatusOK {
		t.Fatalf("GET with a body: %d %s", status, body)
	}
	p.mu.Lock()
	got := p.lastGet
	p.mu.Unlock()
	if want := "include_obfuscation=false&starting_after=3&stream=true "; got != want {
		t.Errorf("the provider received %q; want the query %q and no body", got, want)
	}
	if status, body := g.send(t, http.MethodGet, "/v1/responses/"+id, settleKey, `{"model":"gpt-4o"}`); status != http.StatusBadRequest || !strings.Contains(body, `"param":"model"`) {
		t.Errorf("GET with a body of another parameter: %d %s; want 400 naming it", status, body)
	}
}

// TestAResponsesUsageIsBoundedByItsModelsContextWindow: a Responses call may bring in what its
// provider keeps, which its body does not show, but never more than its model's context window.
func TestAResponsesUsageIsBoundedByItsModelsContextWindow(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","output":[],"store":false,`+
			`"usage":{"input_tokens":1000000000000000000,"output_tokens":20,"total_tokens":1000000000000000020}}`)
	}))
	t.Cleanup(provider.Close)
	cfg := settleConfig(provider.URL)
	cfg.Providers[0].Models[0].ContextWindow = keptWindow
	g := newSettleGatewayFrom(t, cfg)
	if status, body := g.send(t, http.MethodPost, "/v1/responses", settleKey, `{"model":"m","input":"Hi.","store":false,"max_output_tokens":50}`); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	want := charged{requests: 1, tokens: keptWindow + 20, micros: keptWindow*1 + 20*2}
	if got := g.charged(t); got != want {
		t.Errorf("charged %+v; want the context window's input and the output reported, %+v", got, want)
	}
	if n := testutil.ToFloat64(g.metrics.usageOutOfBounds.WithLabelValues("lab")); n != 1 {
		t.Errorf("%v calls counted out of bounds; want 1", n)
	}
}
