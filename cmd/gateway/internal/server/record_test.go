package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// TestRecordPutsBackAGatewayThatRestarted takes the record from a gateway on the memory store
// after it served calls, then starts a new gateway (a new process's empty memory store) with
// that record in its configuration: its first call finds the budget and the day's quotas as the
// record left them, not full again.
func TestRecordPutsBackAGatewayThatRestarted(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	}))
	t.Cleanup(provider.Close)
	first := newSettleGateway(t, provider.URL)
	for range 3 {
		if code, body := first.call(t.Context(), false); code != http.StatusOK {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	spent := first.charged(t)

	if code, body := postRecord(first, `{"versions":{"tenant:acme":0},"unknown":1}`); code != http.StatusBadRequest {
		t.Errorf("a record request with an unknown field: %d %s; want 400", code, body)
	}
	code, body := postRecord(first, `{}`)
	var rec gatewayv1.Record
	if err := json.Unmarshal([]byte(body), &rec); code != http.StatusOK || err != nil {
		t.Fatalf("record: %d %s %v", code, body, err)
	}
	if len(rec.Scopes) != 1 || rec.Scopes[0].Scope != "tenant:acme" || !rec.Scopes[0].Current || rec.Scopes[0].Version != 1 {
		t.Fatalf("record %+v; want the tenant's scope only, current, at version 1", rec.Scopes)
	}
	used := map[string]int64{}
	for _, w := range rec.Scopes[0].Windows {
		for k, v := range w.Used {
			used[k] = v
		}
	}
	want := map[string]int64{"user:alice:requests:day": 3, "tenant:tokens:day": spent.tokens, "tenant:budget": spent.micros}
	for k, v := range want {
		if used[k] != v {
			t.Errorf("the record holds %d of %s; want %d", used[k], k, v)
		}
	}

	cfg := settleConfig(provider.URL)
	cfg.Record = rec.Scopes
	restarted := newSettleGatewayFrom(t, cfg)
	if code, body := restarted.call(t.Context(), false); code != http.StatusOK {
		t.Fatalf("the restarted gateway's call: %d %s", code, body)
	}
	if got := restarted.charged(t); got.requests != spent.requests+1 || got.micros <= spent.micros {
		t.Errorf("after a restart and a call, the tenant used %+v; want the %+v the record held, and the call", got, spent)
	}
}

// postRecord posts body to the gateway's /admin/record.
func postRecord(g *settleGateway, body string) (int, string) {
	r := httptest.NewRequest(http.MethodPost, gatewayv1.RecordPath, strings.NewReader(body))
	w := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}
