package usage

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
