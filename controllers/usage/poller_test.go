package usage

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// fakeGateway serves a usage snapshot, or fails while failing is set.
type fakeGateway struct {
	usage   gatewayv1.Usage
	failing atomic.Bool
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || g.failing.Load() {
		http.Error(w, "no", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(g.usage)
}

// TestPollerPolls polls stub gateways over HTTP on loopback: one that
// answers, one that stops answering, and an address nothing listens on.
func TestPollerPolls(t *testing.T) {
	one := &fakeGateway{usage: *snapshot("gw-1", 0, []gatewayv1.ProviderUsage{{Name: "openai", Traffic: traffic(10, 100, 1, 0, nil)}}, nil)}
	two := &fakeGateway{usage: *snapshot("gw-2", 0, []gatewayv1.ProviderUsage{{Name: "openai", Traffic: traffic(5, 50, 0, 2, nil)}}, nil)}
	s1, s2 := httptest.NewServer(one), httptest.NewServer(two)
	defer s1.Close()
	defer s2.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	updates := make(chan event.GenericEvent, 4)
	p := &Poller{
		Namespace: "sluice",
		Gateways:  StaticGateways{s1.URL + Path, s2.URL + Path, dead.URL + Path},
		Updates:   updates,
	}
	ctx := context.Background()
	if got := p.Usage("sluice"); got != nil {
		t.Fatalf("Usage before a poll = %+v; want nil", got)
	}

	p.Poll(ctx)
	u := p.Usage("sluice")
	if got := u.Providers["openai"]; got.RequestsLastMinute != 15 || got.InFlight != 1 || got.Queued != 2 {
		t.Errorf("openai after the first poll = %+v; want 15 requests, 1 in flight, 2 queued", got)
	}
	if len(u.Unanswered) != 1 || u.Gateways != 3 {
		t.Errorf("gateways %d, unanswered %q; want 3 and the dead one", u.Gateways, u.Unanswered)
	}
	if ev := <-updates; ev.Object.GetNamespace() != "sluice" {
		t.Errorf("update names namespace %q; want sluice", ev.Object.GetNamespace())
	}

	// The second gateway stops answering: its last report still counts.
	two.failing.Store(true)
	p.Poll(ctx)
	u = p.Usage("sluice")
	if got := u.Providers["openai"].RequestsLastMinute; got != 15 {
		t.Errorf("openai requests with a silent gateway = %d; want 15, its last report counted", got)
	}
	want := s2.URL + Path + ": answered 503 Service Unavailable"
	if len(u.Unanswered) != 2 || u.Unanswered[1] != want && u.Unanswered[0] != want {
		t.Errorf("unanswered = %q; want %q among them", u.Unanswered, want)
	}
	if got := p.Usage("elsewhere"); got != nil {
		t.Errorf("Usage of another namespace = %+v; want nil", got)
	}
}

// tokenGateway is a recordingGateway behind an admin token, as a gateway run
// with --admin-token-file.
type tokenGateway struct {
	token string
	recordingGateway
}

func (g *tokenGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	g.recordingGateway.ServeHTTP(w, r)
}

// TestPollerSendsTheAdminToken polls a gateway that asks for a token: with
// the token's file, the usage and the record are read, and a new token in the
// file is sent at the next poll; without it, or with a file that is gone, the
// gateway is unanswered, and what is shown names the file, never the token.
func TestPollerSendsTheAdminToken(t *testing.T) {
	g := &tokenGateway{token: "first-token", recordingGateway: recordingGateway{record: record(current(scope("tenant:acme", 1, takenAt)))}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	writeToken := func(token string) {
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("first-token")
	poll := func(tokenFile string) *Totals {
		p := &Poller{Namespace: "sluice", Gateways: StaticGateways{srv.URL + Path}, Record: &memoryRecord{}, AdminTokenFile: tokenFile}
		p.Poll(context.Background())
		return p.Usage("sluice")
	}

	if u := poll(file); len(u.Unanswered) != 0 || u.Record == nil || len(g.asked()) != 1 {
		t.Errorf("with the token: unanswered %q, record %v, %d record requests; want the usage and the record", u.Unanswered, u.Record, len(g.asked()))
	}
	g.token = "second-token"
	writeToken("second-token")
	if u := poll(file); len(u.Unanswered) != 0 {
		t.Errorf("after the token changed: unanswered %q; want the new token sent", u.Unanswered)
	}
	if u := poll(""); len(u.Unanswered) != 1 || !strings.Contains(u.Unanswered[0], "401") {
		t.Errorf("without the token: unanswered %q; want the gateway's 401", u.Unanswered)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	u := poll(gone)
	if len(u.Unanswered) != 1 || !strings.Contains(u.Unanswered[0], "admin token file") {
		t.Errorf("with a token file that is gone: unanswered %q; want the file named", u.Unanswered)
	}
	for _, shown := range u.Unanswered {
		if strings.Contains(shown, "second-token") {
			t.Errorf("unanswered %q shows the token", shown)
		}
	}
}
