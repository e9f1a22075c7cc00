package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestASnapshotOrAliasGoesUpstreamAsTheClientNamedIt calls the settle table's model, "m", by a
// dated snapshot and by an alias, and an unknown model: the first two reach the provider under
// the name the client sent; the last is refused before it.
func TestASnapshotOrAliasGoesUpstreamAsTheClientNamedIt(t *testing.T) {
	seen := make(chan string, 1)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Model string }
		json.NewDecoder(r.Body).Decode(&body)
		seen <- body.Model
		io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
	}))
	t.Cleanup(provider.Close)
	cfg := settleConfig(provider.URL)
	cfg.Providers[0].Models[0].Aliases = []string{"lab-model"}
	g := newSettleGatewayFrom(t, cfg)
	for model, status := range map[string]int{"m-2024-07-18": http.StatusOK, "m-0613": http.StatusOK, "lab-model": http.StatusOK, "m-latest": http.StatusNotFound} {
		body := strings.Replace(settleBody, `"model":"m"`, `"model":"`+model+`"`, 1)
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+settleKey)
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		if w.Code != status {
			t.Errorf("%s: %d %s; want %d", model, w.Code, w.Body, status)
			continue
		}
		if status != http.StatusOK {
			continue
		}
		if got := <-seen; got != model {
			t.Errorf("%s reached the provider as %q; want the name the client sent", model, got)
		}
		if got := w.Header().Get(headerDegradedModel); got != "" {
			t.Errorf("%s: %s %q; want none, the call went to the model asked for", model, headerDegradedModel, got)
		}
	}
}
