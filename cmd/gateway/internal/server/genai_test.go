package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestGenAIMetricsOfAStream sends a stream and a plain call: both are observed in the GenAI
// operation duration and token usage, under the conventions' labels, and only the stream in the
// time to its first chunk.
func TestGenAIMetricsOfAStream(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
			return
		}
		sendStream(w, "Hello", " there")
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	for _, body := range []string{settleBody, strings.Replace(settleBody, `{"model"`, `{"stream":true,"model"`, 1)} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+settleKey)
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}

	families, err := g.opts.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "gen_ai_") {
			continue
		}
		for _, m := range f.Metric {
			got[f.GetName()+labelsOf(m)] += m.GetHistogram().GetSampleCount()
		}
	}
	const labels = "{gen_ai_operation_name=chat,gen_ai_provider_name=lab,gen_ai_request_model=m"
	want := map[string]uint64{
		"gen_ai_client_operation_duration_seconds{error_type=," + labels[1:] + "}": 2,
		"gen_ai_client_operation_time_to_first_chunk_seconds" + labels + "}":       1,
		"gen_ai_client_token_usage" + labels + ",gen_ai_token_type=input}":         2,
		"gen_ai_client_token_usage" + labels + ",gen_ai_token_type=output}":        2,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s observed %d times; want %d (got %v)", k, got[k], n, got)
		}
	}
}

// labelsOf writes a metric's labels as {name=value,...}, in the order Prometheus keeps them.
func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}
