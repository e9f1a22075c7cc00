package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestContentTypeErrorRefusesAllButJSONInUTF8(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   bool // refused
	}{
		{"none", nil, false},
		{"JSON", []string{"application/json"}, false},
		{"JSON in UTF-8", []string{"application/json; charset=utf-8"}, false},
		{"JSON in UTF-8, other cases", []string{"Application/JSON; Charset=UTF-8"}, false},
		{"JSON in utf8, quoted", []string{`application/json; charset="utf8"`}, false},
		{"JSON in UTF-7", []string{"application/json; charset=utf-7"}, true},
		{"JSON in Latin-1", []string{"application/json; charset=iso-8859-1"}, true},
		{"text", []string{"text/plain"}, true},
		{"a form", []string{"application/x-www-form-urlencoded"}, true},
		{"unreadable", []string{"application/json; charset"}, true},
		{"two", []string{"application/json", "application/json; charset=utf-7"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := contentTypeError(http.Header{"Content-Type": tc.values})
			if got := e != nil; got != tc.want {
				t.Fatalf("contentTypeError(%q) = %v; want refused %t", tc.values, e, tc.want)
			}
			if e != nil && (e.status != http.StatusUnsupportedMediaType || e.Code != "unsupported_media_type") {
				t.Errorf("contentTypeError(%q) = %d %s; want 415 unsupported_media_type", tc.values, e.status, e.Code)
			}
		})
	}
}

func TestIsEventStreamComparesWithoutCase(t *testing.T) {
	tests := []struct {
		contentType string
		want        bool
	}{
		{"text/event-stream", true},
		{"Text/Event-Stream", true},
		{"TEXT/EVENT-STREAM; charset=utf-8", true},
		{" text/event-stream ;x=y", true},
		{"text/event-streams", false},
		{"application/json", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run(tc.contentType, func(t *testing.T) {
			if got := isEventStream(http.Header{"Content-Type": {tc.contentType}}); got != tc.want {
				t.Errorf("isEventStream(%q) = %t; want %t", tc.contentType, got, tc.want)
			}
		})
	}
}

// TestACallGoesUpstreamAsJSONInUTF8 checks that a provider gets Content-Type: application/json
// whatever JSON the client declared, or none, and never a call whose client declared another
// charset or media type: those are refused 415.
func TestACallGoesUpstreamAsJSONInUTF8(t *testing.T) {
	types := make(chan []string, 1)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		types <- r.Header.Values("Content-Type")
		io.WriteString(w, `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	tests := []struct {
		name        string
		contentType string // "" for none
		wantStatus  int
	}{
		{"JSON", "application/json", http.StatusOK},
		{"JSON in UTF-8", "application/json; charset=UTF-8", http.StatusOK},
		{"none", "", http.StatusOK},
		{"JSON in UTF-7", "application/json; charset=utf-7", http.StatusUnsupportedMediaType},
		{"text", "text/plain", http.StatusUnsupportedMediaType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(settleBody))
			r.Header.Set("Authorization", "Bearer "+settleKey)
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			g.Handler().ServeHTTP(w, r)
			if w.Code != tc.wantStatus {
				t.Fatalf("status %d: %s; want %d", w.Code, w.Body, tc.wantStatus)
			}
			if tc.wantStatus != http.StatusOK {
				if len(types) != 0 {
					t.Error("the call reached the provider")
				}
				return
			}
			if got := <-types; !cmp.Equal(got, []string{"application/json"}) {
				t.Errorf("the provider received Content-Type %q; want application/json", got)
			}
		})
	}
}

// TestAStreamIsReadWhateverTheCaseOfItsType has the provider answer a stream as
// Text/Event-Stream: the gateway passes it on as a stream and settles it from its usage chunk.
func TestAStreamIsReadWhateverTheCaseOfItsType(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "Text/Event-Stream; Charset=UTF-8")
		sendStream(w, "Hello")
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions",
		strings.NewReader(strings.Replace(settleBody, `{"model"`, `{"stream":true,"model"`, 1)))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), streamChunk("Hello")) {
		t.Fatalf("status %d: %s; want 200 and the stream", w.Code, w.Body)
	}
	if got, want := g.charged(t), (charged{requests: 1, tokens: 30, micros: 50}); got != want {
		t.Errorf("charged %+v; want %+v, the stream's usage", got, want)
	}
}
