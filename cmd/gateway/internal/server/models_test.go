package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// TestASnapshotOrAliasGoesUpstreamUnderItsProvidersName calls the settle table's model, "m", by
// a snapshot configured as a model of its own, by an alias, and by names the configuration does
// not name: the snapshot reaches the provider under its name, the alias, which only the gateway
// knows, under the model's own name; a snapshot not configured is another model, refused as
// unknown before it.
func TestASnapshotOrAliasGoesUpstreamUnderItsProvidersName(t *testing.T) {
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
	snapshot := cfg.Providers[0].Models[0]
	snapshot.Name, snapshot.Aliases = "m-2024-07-18", nil
	cfg.Providers[0].Models = append(cfg.Providers[0].Models, snapshot)
	g := newSettleGatewayFrom(t, cfg)
	upstream := map[string]string{"m-2024-07-18": "m-2024-07-18", "lab-model": "m"}
	for model, status := range map[string]int{"m-2024-07-18": http.StatusOK, "lab-model": http.StatusOK,
		"m-2024-08-06": http.StatusNotFound, "m-0613": http.StatusNotFound, "m-latest": http.StatusNotFound} {
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
		if got := <-seen; got != upstream[model] {
			t.Errorf("%s reached the provider as %q; want %q", model, got, upstream[model])
		}
		if got := w.Header().Get(headerDegradedModel); got != "" {
			t.Errorf("%s: %s %q; want none, the call went to the model asked for", model, headerDegradedModel, got)
		}
	}
}

// TestAnOrdinaryPhotoFitsTheDefaultBody sends a chat call with a 5.2 MB photo inline, as a
// client sends a phone's picture, and one past the default maxBodyBytes: the first goes to the
// provider, the second is answered 413.
func TestAnOrdinaryPhotoFitsTheDefaultBody(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"choices":[{"message":{"content":"A cat."}}],"usage":{"prompt_tokens":1000,"completion_tokens":20}}`)
	}))
	t.Cleanup(provider.Close)
	cfg := settleConfig(provider.URL)
	cfg.Tenants[0].PerTenant = nil // a photo's tokens are not what this test is about
	g := newSettleGatewayFrom(t, cfg)
	for size, status := range map[int]int{5_200_000: http.StatusOK, 21 << 20: http.StatusRequestEntityTooLarge} {
		photo := "data:image/jpeg;base64," + strings.Repeat("A", size)
		body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"` + photo + `"}}]}]}`
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+settleKey)
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		if w.Code != status {
			t.Errorf("a body of %d bytes: %d %.300s; want %d", len(body), w.Code, w.Body, status)
		}
	}
}

// TestEachProvidersCapIsExported checks the series beside which Little's law puts a provider's
// needs: its maxInFlight less headroom, gone with a configuration that sets none.
func TestEachProvidersCapIsExported(t *testing.T) {
	cfg := settleConfig("http://127.0.0.1:1")
	cfg.Providers[0].MaxInFlight, cfg.Providers[0].HeadroomPercent = 200, 90
	g := newSettleGatewayFrom(t, cfg)
	if got := testutil.ToFloat64(g.metrics.maxInFlight.WithLabelValues("lab")); got != 180 {
		t.Errorf("sluice_gateway_provider_max_in_flight{provider=lab} = %v; want 180, 90%% of 200", got)
	}
	uncapped := settleConfig("http://127.0.0.1:1")
	uncapped.Providers[0].MaxInFlight = 0
	p, err := policy.Compile(uncapped, 1)
	if err != nil {
		t.Fatal(err)
	}
	g.SetPolicy(p)
	if n := testutil.CollectAndCount(g.metrics.maxInFlight); n != 0 {
		t.Errorf("%d series of sluice_gateway_provider_max_in_flight for a provider without a cap; want none", n)
	}
}
