package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAKeyWithAControlCharacterIsRefusedNamingIt checks that a body whose keys hold a control
// character, escaped or not, is refused 400 naming the key, and never reaches the provider: a
// reader that stops at a NUL would read "model\u0000" as a second model.
func TestAKeyWithAControlCharacterIsRefusedNamingIt(t *testing.T) {
	var calls atomic.Int64
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	tests := []struct {
		name, body, wantParam string
	}{
		{"an escaped NUL", `{"model":"m","model\u0000":"o1-pro","messages":[{"role":"user","content":"x"}]}`, "model\x00"},
		{"an escaped line feed in a message", `{"model":"m","messages":[{"role":"user","content":"x","content\n":"y"}]}`, "messages[0].content\n"},
		{"a DEL", "{\"model\":\"m\",\"n\x7f\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "n\x7f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer "+settleKey)
			w := httptest.NewRecorder()
			g.Handler().ServeHTTP(w, r)
			var e struct{ Error struct{ Code, Param string } }
			json.Unmarshal(w.Body.Bytes(), &e)
			if w.Code != http.StatusBadRequest || e.Error.Code != "invalid_request" || e.Error.Param != tc.wantParam {
				t.Errorf("status %d: %s; want 400 invalid_request naming %q", w.Code, w.Body, tc.wantParam)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls reached the provider; want none", n)
	}
}
