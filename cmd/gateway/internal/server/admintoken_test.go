package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// adminToken is the admin token of newAdminGateway, which a test may change or make unreadable.
type adminToken struct {
	token string
	err   error
}

func (a *adminToken) read() (string, error) { return a.token, a.err }

// newAdminGateway is a server on the memory store whose admin endpoints ask for token's token,
// or are open when token is nil.
func newAdminGateway(t *testing.T, token *adminToken) http.Handler {
	t.Helper()
	opts := Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewMemory(jobs.Options{MaxAttempts: 1, ReclaimAfter: time.Minute})}
	if token != nil {
		opts.AdminToken = token.read
	}
	s := New(opts)
	t.Cleanup(s.Close)
	p, err := policy.Compile(settleConfig("http://127.0.0.1:1"), 1)
	if err != nil {
		t.Fatal(err)
	}
	s.SetPolicy(p)
	return s.AdminHandler()
}

// adminRequest sends one request to an admin handler, with authorization as its Authorization
// header unless empty.
func adminRequest(h http.Handler, method, path, authorization string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(`{}`))
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var (
	adminEndpoints = [][2]string{{"GET", "/metrics"}, {"GET", "/admin/usage"}, {"GET", "/admin/queues"}, {"POST", gatewayv1.RecordPath}}
	probes         = [][2]string{{"GET", "/healthz"}, {"GET", "/readyz"}}
)

// TestAdminEndpointsAskForTheToken checks that, with an admin token, every admin endpoint
// refuses a caller without it, or with another, with 401, an OpenAI error body and
// WWW-Authenticate, and serves one with it; that the kubelet's probes stay open; and that a
// new token takes effect at the next request.
func TestAdminEndpointsAskForTheToken(t *testing.T) {
	token := &adminToken{token: "first-token"}
	h := newAdminGateway(t, token)
	for _, e := range adminEndpoints {
		for _, authorization := range []string{"", "Bearer wrong-token", "Basic Zmlyc3QtdG9rZW4=", "Bearer first-token-and-more", "first-token"} {
			w := adminRequest(h, e[0], e[1], authorization)
			var body struct{ Error apiError }
			if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != http.StatusUnauthorized || err != nil || body.Error.Code != "invalid_admin_token" {
				t.Errorf("%s %s with %q: %d %s; want 401 invalid_admin_token", e[0], e[1], authorization, w.Code, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("%s %s with %q: WWW-Authenticate %q; want Bearer", e[0], e[1], authorization, got)
			}
			if strings.Contains(w.Body.String(), "first-token") {
				t.Errorf("%s %s: the refusal shows the token: %s", e[0], e[1], w.Body)
			}
		}
		for _, authorization := range []string{"Bearer first-token", "bearer first-token"} {
			if w := adminRequest(h, e[0], e[1], authorization); w.Code != http.StatusOK {
				t.Errorf("%s %s with the token as %q: %d %s; want 200", e[0], e[1], authorization, w.Code, w.Body)
			}
		}
	}
	for _, p := range probes {
		if w := adminRequest(h, p[0], p[1], ""); w.Code != http.StatusOK {
			t.Errorf("%s %s without a token: %d %s; want the probe open", p[0], p[1], w.Code, w.Body)
		}
	}

	token.token = "second-token"
	if w := adminRequest(h, "GET", "/admin/usage", "Bearer first-token"); w.Code != http.StatusUnauthorized {
		t.Errorf("the old token after a change: %d; want 401", w.Code)
	}
	if w := adminRequest(h, "GET", "/admin/usage", "Bearer second-token"); w.Code != http.StatusOK {
		t.Errorf("the new token after a change: %d %s; want 200", w.Code, w.Body)
	}
}

// TestAdminEndpointsRefuseAllWhileTheTokenIsUnreadable checks that a token file that cannot be
// read lets nobody in, not everybody.
func TestAdminEndpointsRefuseAllWhileTheTokenIsUnreadable(t *testing.T) {
	h := newAdminGateway(t, &adminToken{err: errors.New("read the admin token file: gone")})
	for _, e := range adminEndpoints {
		for _, authorization := range []string{"", "Bearer "} {
			if w := adminRequest(h, e[0], e[1], authorization); w.Code != http.StatusServiceUnavailable {
				t.Errorf("%s %s with %q and no readable token: %d %s; want 503", e[0], e[1], authorization, w.Code, w.Body)
			}
		}
	}
	if w := adminRequest(h, "GET", "/readyz", ""); w.Code != http.StatusOK {
		t.Errorf("/readyz with no readable token: %d; want the probe open", w.Code)
	}
}

// TestAdminEndpointsAreOpenWithoutAToken checks that a gateway run without an admin token
// serves its admin endpoints to any caller, as outside a cluster.
func TestAdminEndpointsAreOpenWithoutAToken(t *testing.T) {
	h := newAdminGateway(t, nil)
	for _, e := range append(adminEndpoints, probes...) {
		if w := adminRequest(h, e[0], e[1], ""); w.Code != http.StatusOK {
			t.Errorf("%s %s: %d %s; want 200", e[0], e[1], w.Code, w.Body)
		}
	}
}
