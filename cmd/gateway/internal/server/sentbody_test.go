package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestARetrySendsTheSameBody sends a call whose cap the gateway renames, which it sends as the
// client's bytes on either side of the new name, to a provider that fails the first attempt:
// both attempts carry the whole body, of the length they announce, with the cap renamed.
func TestARetrySendsTheSameBody(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		attempt := len(bodies)
		mu.Unlock()
		if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) {
			t.Errorf("attempt %d announces %s bytes and sends %d", attempt, got, len(body))
		}
		if attempt == 1 {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"id":"chatcmpl-9","choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
	}))
	t.Cleanup(stub.Close)
	s, _ := newTracedGateway(t, stub.URL)

	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := strings.Replace(settleBody, `"max_tokens"`, `"max_completion_tokens"`, 1)
	if len(bodies) != 2 || bodies[0] != want || bodies[1] != want {
		t.Errorf("the provider received %q; want %q twice", bodies, want)
	}
}
