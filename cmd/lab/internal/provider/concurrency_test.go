package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gate is a Sleep that holds every call until the test opens it, and says
// when a call starts to wait.
type gate struct {
	started chan struct{}
	open    chan struct{}
}

func newGate(calls int) *gate {
	return &gate{started: make(chan struct{}, calls), open: make(chan struct{})}
}

func (g *gate) sleep(ctx context.Context, _ time.Duration) error {
	g.started <- struct{}{}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receive takes one value from ch, failing the test if none comes within
// a bound that no healthy run gets near.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		var zero T
		return zero
	}
}

// status posts body to the chat endpoint of the provider at url and
// returns the answer's status, or -1 if there is none. Goroutines other
// than the test's use it, so it reports rather than fails.
func status(ctx context.Context, url, body string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return -1
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestInFlightCap(t *testing.T) {
	const maxInFlight, calls = 4, 11
	g := newGate(calls)
	p, srv, _ := start(t, func(o *Options) { o.MaxInFlight, o.Sleep = maxInFlight, g.sleep })

	codes := make(chan int, calls)
	for range calls {
		go func() {
			codes <- status(t.Context(), srv.URL, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		}()
	}
	for range maxInFlight {
		receive(t, g.started, "call started")
	}
	// While the first calls are held, every other call is refused at once.
	got := map[int]int{}
	for range calls - maxInFlight {
		got[receive(t, codes, "answer")]++
	}
	if diff := cmp.Diff(got, map[int]int{http.StatusServiceUnavailable: calls - maxInFlight}); diff != "" {
		t.Errorf("answers while full mismatch (-got +want):\n%s", diff)
	}
	close(g.open)
	for range maxInFlight {
		got[receive(t, codes, "answer")]++
	}
	want := map[int]int{http.StatusOK: maxInFlight, http.StatusServiceUnavailable: calls - maxInFlight}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("answers mismatch (-got +want):\n%s", diff)
	}
	st := p.Stats()
	if st.Accepted != maxInFlight || st.Rejected503 != calls-maxInFlight || st.MaxInFlightSeen != maxInFlight || st.InFlight != 0 {
		t.Errorf("Stats() = %+v; want %d accepted, %d rejected with 503, at most %d in flight and none now",
			st, maxInFlight, calls-maxInFlight, maxInFlight)
	}
}

func TestOverloadedBody(t *testing.T) {
	g := newGate(1)
	_, srv, _ := start(t, func(o *Options) { o.MaxInFlight, o.Sleep = 1, g.sleep })
	const call = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	held := make(chan int, 1)
	go func() { held <- status(t.Context(), srv.URL, call) }()
	receive(t, g.started, "call started")

	resp, body := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", testKey, call)
	close(g.open)
	want := apiError{Type: "overloaded_error", Code: "overloaded", Message: "The server is overloaded: too many calls in flight. Please try again shortly."}
	if diff := cmp.Diff(errorOf(t, body), want); resp.StatusCode != 503 || diff != "" {
		t.Errorf("status = %d; want 503; error mismatch (-got +want):\n%s", resp.StatusCode, diff)
	}
	if got := receive(t, held, "answer"); got != http.StatusOK {
		t.Errorf("held call status = %d; want 200", got)
	}
}

func TestClientThatLeavesFreesItsSlot(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "stream"}[stream], func(t *testing.T) {
			g := newGate(1)
			p, _, _ := start(t, func(o *Options) { o.MaxInFlight, o.Sleep = 1, g.sleep })
			ctx, cancel := context.WithCancel(t.Context())
			body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			done := make(chan struct{})
			go func() {
				p.ServeHTTP(httptest.NewRecorder(), req)
				close(done)
			}()
			receive(t, g.started, "call started")
			if got := p.Stats().InFlight; got != 1 {
				t.Errorf("in flight while generating = %d; want 1", got)
			}
			cancel() // the client leaves
			receive(t, done, "handler return")
			got := p.Stats()
			want := Stats{Accepted: 1, Canceled: 1, MaxInFlightSeen: 1, Received: map[string]int64{"POST /v1/chat/completions": 1}}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("Stats() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}
