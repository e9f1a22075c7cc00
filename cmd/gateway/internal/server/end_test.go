package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// panickingWriter is a client's side of an answer whose body write panics, as a bug anywhere on
// the way of an answer would.
type panickingWriter struct{ *httptest.ResponseRecorder }

func (w panickingWriter) Write([]byte) (int, error) { panic("a bug on the way of the answer") }

// TestACallThatPanicsStillEnds has the gateway panic while it passes a served answer on: the
// call still frees its slot in flight, is charged its estimate (its provider served it), is
// counted internal_error and is logged at error with its request id, and the panic reaches
// net/http as http.ErrAbortHandler, which cuts the connection.
func TestACallThatPanicsStillEnds(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, streamChunk("Hello")) // a stream, so that the call has not ended as the write panics
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	log := &syncBuffer{}
	g.log = slog.New(slog.NewTextHandler(log, nil))

	body := strings.Replace(settleBody, `{"model"`, `{"stream":true,"model"`, 1)
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	panicked := func() (v any) {
		defer func() { v = recover() }()
		g.Handler().ServeHTTP(panickingWriter{httptest.NewRecorder()}, r)
		return nil
	}()

	if panicked != http.ErrAbortHandler {
		t.Errorf("the handler panicked with %v; want http.ErrAbortHandler", panicked)
	}
	if n := testutil.ToFloat64(g.metrics.requests.WithLabelValues("acme", "lab", outcomeInternalError)); n != 1 {
		t.Errorf("%v calls counted internal_error; want 1", n)
	}
	if got, want := g.charged(t), g.estimated(t); got != want { // charged also fails the test on a slot held
		t.Errorf("charged %+v; want the estimate %+v", got, want)
	}
	line := logLine(log.String(), "call ended")
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "request_id=req_") || !strings.Contains(line, "a bug on the way of the answer") {
		t.Errorf("log line %q; want it at error, with the call's request id and the panic", line)
	}
}

// TestASpentCallerIsRefusedBeforeItsCallIsCounted sends a body larger than countsAfterCheck
// from a user whose day's one request is spent: it is refused insufficient_quota before its
// tokens are counted. While the request was left, the same body was counted, and refused as
// larger than the tenant's day of 1,000 tokens can ever hold.
func TestASpentCallerIsRefusedBeforeItsCallIsCounted(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`)
	}))
	t.Cleanup(provider.Close)
	cfg := settleConfig(provider.URL)
	cfg.Tenants[0].PerUser[0].Amount = 1
	cfg.Tenants[0].PerTenant[0].Amount = 1000
	g := newSettleGatewayFrom(t, cfg)
	large := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("Tell me more. ", countsAfterCheck/10) + `"}]}`
	send := func(body string) (int, string) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+settleKey)
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	steps := []struct {
		name, body string
		status     int
		code       string
	}{
		{"a large call, counted", large, http.StatusBadRequest, `"code":"request_too_large"`},
		{"the day's one request", settleBody, http.StatusOK, ""},
		{"a large call once the day's request is spent, not counted", large, http.StatusTooManyRequests, `"code":"insufficient_quota"`},
	}
	for _, s := range steps {
		status, body := send(s.body)
		if status != s.status || !strings.Contains(body, s.code) {
			t.Errorf("%s: %d %.200s; want %d with %s", s.name, status, body, s.status, s.code)
		}
	}
}
