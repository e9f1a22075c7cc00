package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/poll"
)

// The overload test's gateway holds at most overloadInFlight calls on overloadConnections
// connections; its clients, overloadWorkers at once, stay under the connections, so that every
// call is answered.
const (
	overloadInFlight    = 8
	overloadConnections = 256
	overloadWorkers     = 64
	// overloadCalls bounds the load, and overloadBound its time.
	overloadCalls = 3000
	overloadBound = 2 * time.Minute
)

// holdMarker is the content of the calls the overload test's provider holds until released.
const holdMarker = "hold this call"

// newHoldingUpstream is the test's provider, except that it holds every call whose body holds
// holdMarker until release is called (or the test ends), and counts them in held.
func newHoldingUpstream(t *testing.T) (u *upstream, held *atomic.Int64, release func()) {
	u, held = &upstream{}, &atomic.Int64{}
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if strings.Contains(string(body), holdMarker) {
			held.Add(1)
			select {
			case <-released:
			case <-r.Context().Done():
				return
			}
		}
		u.serve(w, r)
	}))
	t.Cleanup(u.Close)
	t.Cleanup(release)
	return u, held, release
}

// checkOverloaded fails unless a is the clean refusal of a call past maxInFlight: 503 with
// Retry-After, in an OpenAI error body, that a client may retry.
func checkOverloaded(t *testing.T, a answer) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable {
		t.Errorf("answer %d %s; want 503", a.status, a.body)
		return
	}
	if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q on a 503; want at least a second", a.header.Get("Retry-After"))
	}
	if a.header.Get("X-Should-Retry") == "false" {
		t.Error("a 503 server_overloaded says x-should-retry: false; want it retryable")
	}
	if code := a.errorCode(t); code != "server_overloaded" {
		t.Errorf("503 code %q; want server_overloaded", code)
	}
}

// TestGatewayRefusesPastMaxInFlight holds the gateway's maxInFlight calls at the provider,
// shows that every call past them is refused at once and cleanly, then offers a bounded load of
// several times maxInFlight at once to a fast provider: every call is answered 200 or refused
// cleanly, never a 502 or a broken connection, the gateway keeps serving, and its metric counts
// every refusal.
func TestGatewayRefusesPastMaxInFlight(t *testing.T) {
	up, held, release := newHoldingUpstream(t)
	server := fmt.Sprintf("server: {maxConnections: %d, maxInFlight: %d}\n", overloadConnections, overloadInFlight)
	g := startGateway(t, oneTenantConfig(t, up.URL, server))
	holdBody := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + holdMarker + `"}]}`

	var holders sync.WaitGroup
	for range overloadInFlight {
		holders.Go(func() {
			if a := g.post(t, "/v1/chat/completions", keyAlice, holdBody); a.status != http.StatusOK {
				t.Errorf("a held call: %d %s; want 200 once released", a.status, a.body)
			}
		})
	}
	poll.Until(t, processWait, "the provider to hold maxInFlight calls", func() bool { return held.Load() == overloadInFlight })
	const refusedWhileHeld = 20
	for range refusedWhileHeld {
		checkOverloaded(t, g.post(t, "/v1/chat/completions", keyAlice, chatBody))
	}
	release()
	holders.Wait()

	ok, refused := offerLoad(t, g)
	if ok == 0 {
		t.Errorf("no call of %d under load was answered 200; want the gateway to keep serving", overloadCalls)
	}
	t.Logf("under load: %d answered, %d refused with 503", ok, refused)
	if a := g.post(t, "/v1/chat/completions", keyAlice, chatBody); a.status != http.StatusOK {
		t.Errorf("a call after the load: %d %s; want 200", a.status, a.body)
	}
	want := fmt.Sprintf("sluice_gateway_overloaded_total{tenant=\"acme\"} %d\n", refusedWhileHeld+refused)
	if m := g.metrics(t); !strings.Contains(m, want) {
		t.Errorf("the metrics do not count every refusal; want %q in\n%s", want, grep(m, "sluice_gateway_overloaded"))
	}
}

// offerLoad sends overloadCalls calls from overloadWorkers workers at once, within
// overloadBound, and counts those answered 200 and those refused cleanly; any other answer,
// or a call that got none, fails the test.
func offerLoad(t *testing.T, g *gateway) (ok, refused int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), overloadBound)
	defer cancel()
	load := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: overloadWorkers, MaxConnsPerHost: overloadWorkers}}
	defer load.CloseIdleConnections()
	calls := make(chan struct{}, overloadCalls)
	for range overloadCalls {
		calls <- struct{}{}
	}
	close(calls)
	var mu sync.Mutex
	var workers sync.WaitGroup
	for range overloadWorkers {
		workers.Go(func() {
			for range calls {
				a, err := postWith(ctx, load, g.api+"/v1/chat/completions", keyAlice, chatBody)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("a call under load got no answer: %v", err)
				case a.status == http.StatusOK:
					ok++
				default:
					checkOverloaded(t, a)
					refused++
				}
				mu.Unlock()
			}
		})
	}
	workers.Wait()
	return ok, refused
}

// postWith sends a call with client under ctx and reads its answer whole.
func postWith(ctx context.Context, client *http.Client, url, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode == http.StatusOK && !json.Valid(data) {
		return answer{}, fmt.Errorf("a 200 with a body that is not JSON: %q", data)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
}
