package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// shortTimeouts is a server section whose timeouts end within a second, so that a slow client
// is cut off quickly; a well-behaved stream lasts longer than all of them.
const shortTimeouts = `server:
  readHeaderTimeout: 500ms
  readTimeout: 500ms
  idleTimeout: 500ms
  maxHeaderBytes: 4096
`

// oneTenantConfig writes a configuration of the tenant acme (key keyAlice) on the one provider
// at upstreamURL, which takes up to 1,000 calls at once, with the server section given.
func oneTenantConfig(t *testing.T, upstreamURL, server string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
%s
providers:
  - name: stub
    baseURL: %s/v1
    models: [{name: gpt-4o-mini}]
    maxInFlight: 1000
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [stub]
`, server, upstreamURL, gatewayv1.HashKey(keyAlice))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawExchange is what a client that writes by hand saw of one connection.
type rawExchange struct {
	// sent is how many bytes of the trickle went before the server closed the connection.
	sent int
	// closedEarly is true when the server closed the connection before the trickle ended.
	closedEarly bool
	// reply is everything the server sent.
	reply string
	// readErr is how reading the reply ended, other than by the server closing the connection:
	// nil when the server closed it.
	readErr error
}

// trickleWait is the pause between two bytes of a trickle: 20 bytes a second.
const trickleWait = 50 * time.Millisecond

// exchangeBound bounds one raw exchange, so a server that never closes fails the test instead
// of hanging it.
const exchangeBound = 30 * time.Second

// exchange connects to addr, writes head at once, then trickle a byte at a time, and reads
// until the server closes the connection.
func exchange(t *testing.T, addr, head, trickle string) rawExchange {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(exchangeBound))
	replied := make(chan rawExchange, 1)
	go func() {
		reply, err := io.ReadAll(conn)
		if errors.Is(err, net.ErrClosed) || isReset(err) {
			err = nil // the server closed the connection with data unread
		}
		replied <- rawExchange{reply: string(reply), readErr: err}
	}()
	var x rawExchange
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatalf("write the head: %v", err)
	}
	for x.sent < len(trickle) && !x.closedEarly {
		select {
		case r := <-replied:
			r.sent, r.closedEarly = x.sent, true
			return r
		case <-time.After(trickleWait):
		}
		if _, err := conn.Write([]byte{trickle[x.sent]}); err != nil {
			break // the server closed the connection; its reply says how
		}
		x.sent++
	}
	r := <-replied
	r.sent, r.closedEarly = x.sent, x.sent < len(trickle)
	return r
}

// isReset reports whether err is the peer resetting the connection.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset by peer")
}

// TestGatewayCutsOffSlowClients holds headers and bodies sent a byte at a time, and headers too
// large, against the real gateway: each connection is closed by the gateway before the client
// is done, with the answer HTTP gives, whether or not the client holds a key.
func TestGatewayCutsOffSlowClients(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, oneTenantConfig(t, up.URL, shortTimeouts))
	addr := strings.TrimPrefix(g.api, "http://")
	headers := func(key string) string {
		h := "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
		if key != "" {
			h += "Authorization: Bearer " + key + "\r\n"
		}
		return h + "\r\n"
	}
	padding := strings.Repeat(" ", 400) // 20 s at trickleWait: far past every timeout
	tests := []struct {
		name, head, trickle string
		// wantStatus starts the reply; empty means none: the gateway closes without a word.
		wantStatus string
		wantCode   string
	}{
		{name: "headers a byte at a time", head: "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nX-Padding: ", trickle: padding},
		{name: "body a byte at a time", head: headers(keyAlice) + `{"model":"gpt-4o-mini",`, trickle: padding,
			wantStatus: "HTTP/1.1 408 ", wantCode: `"code":"request_timeout"`},
		{name: "body a byte at a time without a key", head: headers("") + `{"model":"gpt-4o-mini",`, trickle: padding,
			wantStatus: "HTTP/1.1 401 ", wantCode: `"code":"missing_api_key"`},
		{name: "headers over maxHeaderBytes", head: "GET /v1/models HTTP/1.1\r\nHost: gateway\r\nX-Padding: " + strings.Repeat("a", 16<<10) + "\r\n\r\n",
			wantStatus: "HTTP/1.1 431 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := exchange(t, addr, tc.head, tc.trickle)
			if x.readErr != nil {
				t.Fatalf("the gateway did not close the connection: %v (sent %d of %d bytes, reply %q)", x.readErr, x.sent, len(tc.trickle), x.reply)
			}
			if tc.trickle != "" && !x.closedEarly {
				t.Errorf("the gateway waited for all %d bytes; want the connection closed before", len(tc.trickle))
			}
			if !strings.HasPrefix(x.reply, tc.wantStatus) || (tc.wantStatus == "" && x.reply != "") {
				t.Errorf("reply %q; want it to start with %q", x.reply, tc.wantStatus)
			}
			if !strings.Contains(x.reply, tc.wantCode) {
				t.Errorf("reply %q; want an OpenAI error body with %s", x.reply, tc.wantCode)
			}
		})
	}
	if a := g.post(t, "/v1/chat/completions", keyAlice, chatBody); a.status != http.StatusOK {
		t.Errorf("a call after the slow clients: %d %s; want 200", a.status, a.body)
	}
}

// slowChunks is how many chunks the slow provider streams, and slowChunkWait the pause before
// each: together longer than every timeout of shortTimeouts.
const (
	slowChunks    = 8
	slowChunkWait = 300 * time.Millisecond
)

// newSlowStreamUpstream is a provider that streams slowChunks chunks, one every slowChunkWait,
// then its usage and [DONE].
func newSlowStreamUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range slowChunks {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(slowChunkWait):
			}
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":8,\"total_tokens\":15}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// TestGatewayKeepsLongStreams streams a chat completion from a provider that sends its chunks
// slowly, for longer than every timeout the gateway has: the client receives every chunk and
// the end of the stream.
func TestGatewayKeepsLongStreams(t *testing.T) {
	up := newSlowStreamUpstream(t)
	g := startGateway(t, oneTenantConfig(t, up.URL, shortTimeouts))
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Tell a long story."}]}`
	for attempt := range 2 { // the second on the connection the first kept alive
		req, err := http.NewRequest(http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+keyAlice)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", attempt, err)
		}
		chunks, done := readStream(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || chunks != slowChunks || !done {
			t.Errorf("stream %d: status %d, %d chunks, [DONE] %v; want 200, %d chunks and [DONE]", attempt, resp.StatusCode, chunks, done, slowChunks)
		}
	}
}

// readStream counts a chat stream's chunks that carry content, and reports whether it ended
// with [DONE].
func readStream(t *testing.T, body io.Reader) (chunks int, done bool) {
	t.Helper()
	lines := bufio.NewScanner(body)
	for lines.Scan() {
		switch line := lines.Text(); {
		case line == "data: [DONE]":
			done = true
		case strings.Contains(line, `"content":"word`):
			chunks++
		}
	}
	if err := lines.Err(); err != nil {
		t.Errorf("read the stream: %v", err)
	}
	return chunks, done
}

// TestIdleConnectionsDoNotHoldTheCallsSlots fills a gateway's maxConnections with clients that
// sent one request each and keep their connections alive, idle: a new client's call is still
// answered, an idle connection closed to make room for it.
func TestIdleConnectionsDoNotHoldTheCallsSlots(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, oneTenantConfig(t, up.URL, "server:\n  maxConnections: 8\n  maxInFlight: 4\n  idleTimeout: 10m\n"))
	for i := range 8 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(g.api, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /v1/models HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\n\r\n", keyAlice)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("idle client %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if a := g.post(t, "/v1/chat/completions", keyAlice, chatBody); a.status != http.StatusOK {
		t.Errorf("a call with every connection held idle: %d %s; want 200", a.status, a.body)
	}
}
