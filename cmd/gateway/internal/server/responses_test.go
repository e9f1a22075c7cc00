package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResponsesAndModerationsAreChargedLikeCalls sends a Responses call, streamed and not, and
// a moderation through the gateway: the first two are charged the usage the provider reports,
// the moderation a request and nothing else.
func TestResponsesAndModerationsAreChargedLikeCalls(t *testing.T) {
	usage := charged{requests: 1, tokens: 10 + 20, micros: 10*1 + 20*2}
	completed := `{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}}`
	tests := []struct {
		name, path, body string
		sent             string // in the body the provider received
		provider         http.HandlerFunc
		want             charged
		answer           string
	}{{
		name: "a response", path: "/v1/responses",
		body: `{"model":"m","input":"Say hello.","max_output_tokens":50}`,
		provider: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}`)
		},
		want: usage, answer: `"object":"response"`,
	}, {
		name: "a streamed response", path: "/v1/responses",
		body: `{"model":"m","input":"Say hello.","stream":true}`,
		provider: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hello\"}\n\n")
			io.WriteString(w, "event: response.completed\ndata: "+completed+"\n\n")
		},
		want: usage, answer: "event: response.completed\ndata: " + completed,
		sent: `"max_output_tokens":256`, // the cap the estimate assumed, the model's default
	}, {
		name: "a moderation", path: "/v1/moderations",
		body: `{"model":"m","input":"I want to hurt them."}`,
		provider: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"id":"modr-1","model":"m","results":[{"flagged":true}]}`)
		},
		want: charged{requests: 1}, answer: `"flagged":true`, sent: `{"model":"m","input":"I want to hurt them."}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var path, sent string
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				path, sent = r.URL.Path, string(body)
				tc.provider(w, r)
			}))
			t.Cleanup(provider.Close)
			g := newSettleGateway(t, provider.URL)
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer "+settleKey)
			w := httptest.NewRecorder()
			g.Handler().ServeHTTP(w, r)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), tc.answer) {
				t.Errorf("%d %s; want 200 holding %s", w.Code, w.Body, tc.answer)
			}
			if !strings.Contains(sent, tc.sent) {
				t.Errorf("the provider received %s; want it to hold %s", sent, tc.sent)
			}
			if path != tc.path {
				t.Errorf("the provider was called at %s; want %s", path, tc.path)
			}
			if got := g.charged(t); got != tc.want {
				t.Errorf("charged %+v; want %+v", got, tc.want)
			}
		})
	}
}
