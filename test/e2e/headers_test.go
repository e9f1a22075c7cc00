package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
)

// TestWhatGoesUpstreamAndWhatComesBack runs the gateway binary in front of a provider that sets
// a cookie on every answer, throttles with Retry-Afters no client should follow, and names its
// streams' type in capitals, and sends it what a client should not get through: another charset,
// a key with a NUL in it, two Authorization headers, one folded over two lines.
func TestWhatGoesUpstreamAndWhatComesBack(t *testing.T) {
	rec := newRecorder(t)
	throttling := httptest.NewServer(http.HandlerFunc(serveQuirks))
	t.Cleanup(throttling.Close)
	g := startGateway(t, quirksConfig(t, rec.URL, throttling.URL))
	msg := `"messages":[{"role":"user","content":"Say hi."}]`
	chat := `{"model":"gpt-4o-mini",` + msg + `}`

	t.Run("the body goes as JSON in UTF-8, or not at all", func(t *testing.T) {
		for contentType, want := range map[string]int{
			"application/json; charset=utf-8": http.StatusOK, "": http.StatusOK,
			"application/json; charset=utf-7": http.StatusUnsupportedMediaType, "text/plain": http.StatusUnsupportedMediaType,
		} {
			before := rec.count()
			a := sendWith(t, g, chat, map[string]string{"Authorization": "Bearer " + keyReader, "Content-Type": contentType})
			if a.status != want {
				t.Errorf("Content-Type %q: %d %s; want %d", contentType, a.status, a.body, want)
				continue
			}
			if want != http.StatusOK {
				if rec.count() != before {
					t.Errorf("Content-Type %q: the call reached the provider", contentType)
				}
				continue
			}
			if _, h, _ := rec.last(t); h.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q: the provider received %q; want application/json", contentType, h.Get("Content-Type"))
			}
		}
	})

	t.Run("a key with a control character is refused naming it", func(t *testing.T) {
		refusedNaming(t, g, rec, "/v1/chat/completions", `{"model":"gpt-4o-mini","model\u0000":"o1-pro",`+msg+`}`, "model\x00")
	})

	t.Run("a provider's headers reach the client by an allowlist", func(t *testing.T) {
		a := g.post(t, "/v1/chat/completions", keyQuirks, chat)
		if a.status != http.StatusOK || a.header.Get("Set-Cookie") != "" || a.header.Get("Cache-Control") != "no-store" {
			t.Errorf("an answer with a cookie: %d, Set-Cookie %q, Cache-Control %q; want 200, none, and no-store", a.status, a.header.Get("Set-Cookie"), a.header.Get("Cache-Control"))
		}
	})

	t.Run("a stream is a stream whatever the case of its type", func(t *testing.T) {
		a := g.post(t, "/v1/chat/completions", keyQuirks, `{"model":"gpt-4o-mini","stream":true,`+msg+`}`)
		if a.status != http.StatusOK || !strings.Contains(string(a.body), "data: [DONE]") {
			t.Errorf("a stream of type Text/Event-Stream: %d %s; want 200 and the stream", a.status, a.body)
		}
	})

	t.Run("a throttle says when to come back in the gateway's own words", func(t *testing.T) {
		for _, asked := range []string{"-5", "Thu, 01 Jan 2099 00:00:00 GMT", "86400"} {
			a := g.post(t, "/v1/chat/completions", keyQuirks, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"throttle `+asked+`"}]}`)
			retry, err := strconv.Atoi(a.header.Get("Retry-After"))
			if a.status != http.StatusTooManyRequests || err != nil || retry < 1 || retry > 2 || a.header.Get("Set-Cookie") != "" {
				t.Errorf("a 429 with Retry-After %q: %d, Retry-After %q, Set-Cookie %q; want 429, 1 or 2 (the retry maxDelay), no cookie",
					asked, a.status, a.header.Get("Retry-After"), a.header.Get("Set-Cookie"))
			}
		}
	})

	t.Run("two Authorization headers are refused", func(t *testing.T) {
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + keyReader + "\r\nAuthorization: Bearer " + keyQuirks + "\r\n"
		if status, code := rawCall(t, g, head, chat); status != http.StatusUnauthorized || code != "ambiguous_api_key" {
			t.Errorf("two Authorization headers: %d %s; want 401 ambiguous_api_key", status, code)
		}
	})

	t.Run("a folded Authorization is refused", func(t *testing.T) {
		// Go's server joins the two lines into "Bearer sk-reader-alice": a valid key.
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer\r\n " + keyReader + "\r\n"
		if status, code := rawCall(t, g, head, chat); status != http.StatusUnauthorized || code != "ambiguous_api_key" {
			t.Errorf("a folded Authorization: %d %s; want 401 ambiguous_api_key", status, code)
		}
		head = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + keyReader + "\r\nUser-Agent: folded\r\n agent\r\n"
		if status, code := rawCall(t, g, head, chat); status != http.StatusOK {
			t.Errorf("another header folded: %d %s; want 200", status, code)
		}
	})
}

// TestGatewaySlowsDownKeyGuessing sends wrong keys from one address until the gateway answers
// 429, then a valid key from the same address, which is answered 429 unchecked until the
// address's allowance is back.
func TestGatewaySlowsDownKeyGuessing(t *testing.T) {
	rec := newRecorder(t)
	g := startGateway(t, writeReadingConfig(t, rec.URL))
	failures := 0
	for ; failures < 100; failures++ {
		a := g.request(t, http.MethodGet, "/v1/models", fmt.Sprintf("sk-guess-%d", failures), "")
		if a.status == http.StatusUnauthorized {
			continue
		}
		if a.status != http.StatusTooManyRequests || a.errorCode(t) != "too_many_failed_authentications" || a.header.Get("Retry-After") == "" {
			t.Fatalf("guess %d: %d %s, Retry-After %q; want 401, or 429 too_many_failed_authentications with Retry-After", failures+1, a.status, a.body, a.header.Get("Retry-After"))
		}
		break
	}
	if failures == 0 || failures >= 100 {
		t.Fatalf("%d wrong keys were answered 401 before a 429; want some, then 429", failures)
	}
	if a := g.request(t, http.MethodGet, "/v1/models", keyReader, ""); a.status != http.StatusTooManyRequests {
		t.Errorf("a valid key from the guessing address, at once: %d %s; want 429: the address's keys are not checked until its allowance is back", a.status, a.body)
	}
	poll.Until(t, 30*time.Second, "a valid key from the guessing address to be served once its allowance is back", func() bool {
		return g.request(t, http.MethodGet, "/v1/models", keyReader, "").status == http.StatusOK
	})
}

// keyQuirks is the key of the user whose calls go to the quirky provider.
const keyQuirks = "sk-quirks-carol"

// quirksConfig is writeReadingConfig's tenant on the recording provider at recURL, and a tenant
// whose model's provider, at quirksURL, is the quirky one (see serveQuirks), with a retry
// maxDelay of 2 s.
func quirksConfig(t *testing.T, recURL, quirksURL string) string {
	t.Helper()
	path := writeKeyedConfig(t, fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
providers:
  - name: rec
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 50}
    retry: {maxAttempts: 1}
  - name: quirks
    baseURL: %s/v1
    apiKeyFile: provider.key
    models:
      - {name: gpt-4o-mini, encoding: o200k_base, defaultMaxTokens: 50}
    retry: {maxAttempts: 1, maxDelay: 2s}
tenants:
  - name: acme
    keys:
      - {sha256: %s, user: alice}
    providers: [rec]
  - name: quirks
    keys:
      - {sha256: %s, user: carol}
    providers: [quirks]
`, recURL, quirksURL, gatewayv1.HashKey(keyReader), gatewayv1.HashKey(keyQuirks)))
	return path
}

// serveQuirks answers as a provider whose headers a client should not see: a cookie on every
// answer, streams of type Text/Event-Stream, and for a message "throttle RETRY-AFTER" a 429 with
// that Retry-After.
func serveQuirks(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Set-Cookie", "__cf_bm=the-gateways-session; HttpOnly")
	w.Header().Set("Cache-Control", "no-store")
	if _, asked, ok := strings.Cut(string(body), "throttle "); ok {
		asked, _, _ = strings.Cut(asked, `"`)
		w.Header().Set("Retry-After", asked)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached.","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	usage := `"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}`
	if strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "Text/Event-Stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"Hi."}}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[],`+usage+"}\n\ndata: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hi."}}],`+usage+`}`)
}

// sendWith posts body to the gateway's chat completions with exactly the headers given (none
// for an empty value), and returns its answer.
func sendWith(t *testing.T, g *gateway, body string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range headers {
		if value != "" {
			req.Header.Set(name, value)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// rawCall writes a request of head (its request line and headers, each line ending in CRLF) and
// body to the gateway over a connection of its own, and returns the answer's status and error
// code ("" for none).
func rawCall(t *testing.T, g *gateway, head, body string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(exchangeBound))
	fmt.Fprintf(conn, "%sContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", head, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: data}
	if a.status == http.StatusOK {
		return a.status, ""
	}
	return a.status, a.errorCode(t)
}
