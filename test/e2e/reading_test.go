package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// recorder is a provider that keeps the raw bodies and headers it receives, and answers as
// OpenAI does: a chat completion with usage, or, for a message that asks, a 500 whose body
// holds its internals or a 400 that is the client's to read.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	received int
}

const (
	failInside     = "fail inside"
	refuseTheCall  = "refuse the call"
	providerSecret = "Traceback: /srv/model/worker.py line 42"
)

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(rec.serve))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.bodies, rec.headers = append(rec.bodies, body), append(rec.headers, r.Header.Clone())
	rec.received++
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.Contains(string(body), failInside):
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"server_error"}}`, providerSecret)
	case strings.Contains(string(body), refuseTheCall):
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"Invalid 'messages[0].content': string too long.","type":"invalid_request_error","param":"messages[0].content","code":"string_above_max_length"}}`)
	default:
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hi."}}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`)
	}
}

// last returns the raw body and headers of the last call received, and how many were.
func (rec *recorder) last(t *testing.T) (map[string]any, http.Header, int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.received == 0 {
		t.Fatal("the provider received no call")
	}
	var body map[string]any
	if err := json.Unmarshal(rec.bodies[len(rec.bodies)-1], &body); err != nil {
		t.Fatalf("the provider received a body that is not JSON: %v", err)
	}
	return body, rec.headers[len(rec.headers)-1], rec.received
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.received
}

const (
	keyReader  = "sk-reader-alice"
	keyChurner = "sk-churn-bob"
)

// writeReadingConfig is one tenant whose user may spend 2,000 tokens a day, on a recording
// provider whose model has an alias, with bodies up to 2 MiB.
func writeReadingConfig(t *testing.T, url string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
server:
  maxBodyBytes: 2097152
providers:
  - name: rec
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, aliases: [mini], encoding: o200k_base, defaultMaxTokens: 50}
      - {name: llama, defaultMaxTokens: 50, maxTokensParam: max_tokens}
    retry: {maxAttempts: 1}
tenants:
  - name: acme
    keys:
      - {sha256: %s, user: alice}
    providers: [rec]
    perUser:
      - {dimension: tokens, amount: 2000, per: day, onLimit: Reject}
  - name: churn
    keys:
      - {sha256: %s, user: bob}
    providers: [rec]
    perUser:
      - {dimension: requests, amount: 20, per: minute, onLimit: Reject}
`, url, gatewayv1.HashKey(keyReader), gatewayv1.HashKey(keyChurner))
	return writeKeyedConfig(t, cfg)
}

// TestWhatTheGatewayChecksIsWhatTheProviderGets sends, through the gateway binary, bodies that
// a provider would read otherwise than a Go struct does, caps of another endpoint, parts that
// are not text and headers that are not the provider's to see, and reads what a recording
// provider received.
func TestWhatTheGatewayChecksIsWhatTheProviderGets(t *testing.T) {
	rec := newRecorder(t)
	g := startGateway(t, writeReadingConfig(t, rec.URL))
	msg := `"messages":[{"role":"user","content":"Say hi."}]`

	t.Run("a key read twice, or in other cases, is refused naming it", func(t *testing.T) {
		for body, param := range map[string]string{
			`{"model":"o1-pro","Model":"gpt-4o-mini",` + msg + `}`:                                                             "Model",
			`{"model":"gpt-4o-mini","max_tokens":5000,"Max_Tokens":1,` + msg + `}`:                                             "Max_Tokens",
			`{"model":"gpt-4o-mini","max_tokens":5000,"max_tokens":1,` + msg + `}`:                                             "max_tokens",
			`{"model":"gpt-4o-mini","n":50,"N":1,` + msg + `}`:                                                                 "N",
			`{"model":"gpt-4o-mini","MAX_TOKENS":1,` + msg + `}`:                                                               "MAX_TOKENS",
			`{"model":"gpt-4o-mini","max_completion_tokens":1,"max_tokens":5000,` + msg + `}`:                                  "max_tokens",
			`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true,"Include_Usage":false},` + msg + `}`:  "stream_options.Include_Usage",
			`{"model":"gpt-4o-mini","stream":true,"Stream":false,` + msg + `}`:                                                 "Stream",
			`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a","Content":"` + strings.Repeat("b", 9000) + `"}]}`: "messages[0].Content",
		} {
			refusedNaming(t, g, rec, "/v1/chat/completions", body, param)
		}
	})

	t.Run("another endpoint's cap is refused", func(t *testing.T) {
		refusedNaming(t, g, rec, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_output_tokens":1,`+msg+`}`, "max_output_tokens")
		refusedNaming(t, g, rec, "/v1/responses", `{"model":"gpt-4o-mini","input":"Say hi.","max_tokens":1}`, "max_tokens")
		refusedNaming(t, g, rec, "/v1/completions", `{"model":"gpt-4o-mini","prompt":"Say hi.","max_completion_tokens":1}`, "max_completion_tokens")
	})

	t.Run("a job's body is read as a call's", func(t *testing.T) {
		before := rec.count()
		a := g.post(t, "/v1/jobs", keyReader, `{"endpoint":"/v1/chat/completions","body":{"model":"gpt-4o-mini","stream":true,"Stream":false,`+msg+`}}`)
		if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), `"param":"Stream"`) {
			t.Errorf("a job with stream and Stream: %d %s; want 400 naming Stream", a.status, a.body)
		}
		if rec.count() != before {
			t.Error("the job's call reached the provider")
		}
	})

	t.Run("creating and cancelling jobs is bounded by the caller's requests", func(t *testing.T) {
		job := `{"endpoint":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":5,` + msg + `}}`
		created := 0
		for range 100 {
			a := g.post(t, "/v1/jobs", keyChurner, job)
			if a.status != http.StatusAccepted {
				if a.status != http.StatusTooManyRequests || a.errorCode(t) != "rate_limit_exceeded" {
					t.Errorf("creating a job past the limit: %d %s; want 429 rate_limit_exceeded", a.status, a.body)
				}
				break
			}
			created++
			g.request(t, http.MethodDelete, "/v1/jobs/"+a.job(t).ID, keyChurner, "")
		}
		if created > 20 {
			t.Errorf("%d jobs created and cancelled in a row by a user of 20 requests a minute; want at most 20", created)
		}
	})

	t.Run("every part counts", func(t *testing.T) {
		audio := strings.Repeat("UklGR", 120_000) // 600 KB of base64
		for _, part := range []string{
			`{"type":"input_audio","input_audio":{"data":"` + audio + `","format":"wav"}}`,
			`{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + audio + `"}}`,
		} {
			before := rec.count()
			body := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` + part + `]}]}`
			a := g.post(t, "/v1/chat/completions", keyReader, body)
			if a.status != http.StatusBadRequest || a.errorCode(t) != "request_too_large" {
				t.Errorf("600 KB of a part for a user of 2,000 tokens a day: %d %.300s; want 400 request_too_large", a.status, a.body)
			}
			if rec.count() != before {
				t.Error("the call reached the provider")
			}
		}
	})

	t.Run("an alias goes upstream under its model's name, with the endpoint's cap", func(t *testing.T) {
		a := g.post(t, "/v1/chat/completions", keyReader, `{"model":"mini",`+msg+`}`)
		if a.status != http.StatusOK {
			t.Fatalf("a call for the alias: %d %s", a.status, a.body)
		}
		body, _, _ := rec.last(t)
		if body["model"] != "gpt-4o-mini" || body["max_completion_tokens"] != 50.0 {
			t.Errorf("the provider received model %v and max_completion_tokens %v; want gpt-4o-mini and 50", body["model"], body["max_completion_tokens"])
		}
	})

	t.Run("a cap goes upstream in the field its provider reads", func(t *testing.T) {
		a := g.post(t, "/v1/chat/completions", keyReader, `{"model":"llama","max_completion_tokens":7,`+msg+`}`)
		if a.status != http.StatusOK {
			t.Fatalf("a call for a model whose provider reads max_tokens: %d %s", a.status, a.body)
		}
		body, _, _ := rec.last(t)
		if _, both := body["max_completion_tokens"]; body["max_tokens"] != 7.0 || both {
			t.Errorf("the provider received max_tokens %v and max_completion_tokens %v; want max_tokens 7 alone", body["max_tokens"], body["max_completion_tokens"])
		}
	})

	t.Run("headers go upstream by an allowlist", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini",`+msg+`}`))
		for name, value := range map[string]string{
			"Authorization": "Bearer " + keyReader, "Api-Key": keyReader, "Cookie": "session=" + keyReader,
			"Connection": "Upgrade", "Upgrade": "websocket", "Openai-Organization": "org-client", "X-Internal-Route": "admin",
			"User-Agent": "OpenAI/Python 1.99.0", "Content-Type": "application/json",
		} {
			req.Header.Set(name, value)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a call with the client's headers: %d", resp.StatusCode)
		}
		_, h, _ := rec.last(t)
		for _, name := range []string{"Api-Key", "Cookie", "Upgrade", "Openai-Organization", "X-Internal-Route"} {
			if v := h.Get(name); v != "" {
				t.Errorf("the provider received %s: %q; want none", name, v)
			}
		}
		if got := h.Get("Authorization"); got != "Bearer "+providerKey {
			t.Errorf("the provider received Authorization %q; want its own key", got)
		}
		if got := h.Get("User-Agent"); got != "OpenAI/Python 1.99.0" {
			t.Errorf("the provider received User-Agent %q; want the client's", got)
		}
	})

	t.Run("a provider's 5xx is the gateway's error, its 4xx the provider's", func(t *testing.T) {
		a := g.post(t, "/v1/chat/completions", keyReader, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+failInside+`"}]}`)
		if a.status != http.StatusInternalServerError || a.errorCode(t) != "provider_error" || strings.Contains(string(a.body), providerSecret) {
			t.Errorf("the provider's 500: %d %s; want 500 provider_error without the provider's body", a.status, a.body)
		}
		a = g.post(t, "/v1/chat/completions", keyReader, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+refuseTheCall+`"}]}`)
		if a.status != http.StatusBadRequest || a.errorCode(t) != "string_above_max_length" {
			t.Errorf("the provider's 400: %d %s; want it as the provider sent it", a.status, a.body)
		}
	})

	t.Run("a model is served by its name and its alias", func(t *testing.T) {
		for id, status := range map[string]int{"gpt-4o-mini": http.StatusOK, "mini": http.StatusOK, "gpt-4o": http.StatusNotFound} {
			a := g.request(t, http.MethodGet, "/v1/models/"+id, keyReader, "")
			if a.status != status {
				t.Errorf("GET /v1/models/%s: %d %s; want %d", id, a.status, a.body, status)
				continue
			}
			var m struct {
				ID, Object string
				Created    int64
			}
			if status == http.StatusOK && (json.Unmarshal(a.body, &m) != nil || m.ID != id || m.Object != "model" || m.Created <= 0) {
				t.Errorf("GET /v1/models/%s: %s; want the model with its created time", id, a.body)
			}
		}
	})
}

// refusedNaming sends a body that must be refused with 400 naming param, before the provider.
func refusedNaming(t *testing.T, g *gateway, rec *recorder, path, body, param string) {
	t.Helper()
	before := rec.count()
	a := g.post(t, path, keyReader, body)
	var e struct{ Error struct{ Param string } }
	if json.Unmarshal(a.body, &e); a.status != http.StatusBadRequest || e.Error.Param != param {
		t.Errorf("%.80s: %d %s; want 400 naming %s", body, a.status, a.body, param)
	}
	if rec.count() != before {
		t.Errorf("%.80s reached the provider", body)
	}
}
