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

// TestARetrySendsTheSameBody sends calls whose cap the gateway renames to a provider that fails
// each first attempt: a short body, joined in one piece, and a long one, sent as the client's
// bytes on either side of the new name. Both attempts of each carry the whole body, of the length
// they announce, with the cap renamed.
func TestARetrySendsTheSameBody(t *testing.T) {
	long := strings.Replace(settleBody, "Say hello.", strings.Repeat("Say hello. ", joinedBelow/10), 1)
	for name, body := range map[string]string{"short": settleBody, "long": long} {
		t.Run(name, func(t *testing.T) {
			want := strings.Replace(body, `"max_tokens"`, `"max_completion_tokens"`, 1)
			if got := sentTwice(t, body); len(got) != 2 || got[0] != want || got[1] != want {
				t.Errorf("the provider received bodies of %d bytes; want two of %d, the cap renamed", lengths(got), len(want))
			}
		})
	}
}

// sentTwice sends a chat of body through a gateway whose provider fails its first attempt, and
// returns the bodies that the provider received.
func sentTwice(t *testing.T, body string) []string {
	var mu sync.Mutex
	var bodies []string
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(received))
		attempt := len(bodies)
		mu.Unlock()
		if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(received)) {
			t.Errorf("attempt %d announces %s bytes and sends %d", attempt, got, len(received))
		}
		if attempt == 1 {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"id":"chatcmpl-9","choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
	}))
	t.Cleanup(stub.Close)
	s, _ := newTracedGateway(t, stub.URL)

	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	return bodies
}

// lengths are the lengths of bodies.
func lengths(bodies []string) []int {
	n := make([]int, len(bodies))
	for i, b := range bodies {
		n[i] = len(b)
	}
	return n
}
