package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// noProvider is the address of a provider for gateways whose jobs' calls never go out.
const noProvider = "http://127.0.0.1:1"

// globexKey is the key of a second tenant, globex, beside the settle table's acme.
const globexKey = "sk-globex-bob"

// lostJobsGateway is a gateway whose jobs are kept in a Redis that the test empties.
type lostJobsGateway struct {
	*Server
	redis *redisserver.Server
	log   *syncBuffer
}

// newLostJobsGateway is a gateway in front of the provider at providerURL, which it waits a
// minute for.
func newLostJobsGateway(t *testing.T, providerURL string) *lostJobsGateway {
	t.Helper()
	srv := redisserver.Start(t)
	cfg := settleConfig(providerURL)
	cfg.Providers[0].Timeout.Duration, cfg.Providers[0].CallTimeout.Duration = time.Minute, time.Minute
	cfg.Tenants = append(cfg.Tenants, gatewayv1.Tenant{Name: "globex", Providers: []string{"lab"},
		Keys: []gatewayv1.Key{{SHA256: gatewayv1.HashKey(globexKey), User: "bob"}}})
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := &lostJobsGateway{redis: srv, log: &syncBuffer{}}
	g.Server = New(Options{Limiter: ratelimit.NewMemory(), Jobs: jobs.NewRedis(srv.Client(t), "test", jobs.Options{}),
		Logger: slog.New(slog.NewTextHandler(g.log, nil))})
	g.SetPolicy(p)
	t.Cleanup(g.Close)
	return g
}

// serve sends a request with key and returns the answer's status and body.
func (g *lostJobsGateway) serve(method, path, key, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// addJob sends the settle table's call as acme's job and returns its id.
func (g *lostJobsGateway) addJob(t *testing.T) string {
	t.Helper()
	code, body := g.serve(http.MethodPost, "/v1/jobs", settleKey, `{"endpoint":"/v1/chat/completions","body":`+settleBody+`}`)
	var j jobAnswer
	if err := json.Unmarshal([]byte(body), &j); code != http.StatusAccepted || err != nil {
		t.Fatalf("POST /v1/jobs: %d %s", code, body)
	}
	return j.ID
}

func (g *lostJobsGateway) flush(t *testing.T) {
	t.Helper()
	if err := g.redis.Client(t).FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// wantError checks an answer's status and its OpenAI error's type and code.
func wantError(t *testing.T, what string, code int, body string, wantCode int, wantType, wantErrCode string) {
	t.Helper()
	var e struct{ Error apiError }
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != wantCode || e.Error.Type != wantType || e.Error.Code != wantErrCode {
		t.Errorf("%s: %d %s; want %d with type %s, code %s", what, code, body, wantCode, wantType, wantErrCode)
	}
}

// TestAJobItsStoreLostIsGone adds a job, then flushes the Redis that keeps it: polling or
// cancelling the job is answered 410 job_lost, counted once, while an id the store never gave
// is 404 job_not_found, and a job added after the loss reads as any other.
func TestAJobItsStoreLostIsGone(t *testing.T) {
	g := newLostJobsGateway(t, noProvider)
	lost := g.addJob(t)
	if code, body := g.serve(http.MethodGet, "/v1/jobs/"+lost, settleKey, ""); code != http.StatusOK {
		t.Fatalf("GET the job before the loss: %d %s", code, body)
	}
	g.flush(t)

	code, body := g.serve(http.MethodGet, "/v1/jobs/"+lost, settleKey, "")
	wantError(t, "GET the lost job", code, body, http.StatusGone, typeInvalidRequest, "job_lost")
	if !strings.Contains(body, "was accepted") || !strings.Contains(body, "lost it") || !strings.Contains(body, "submit it again") {
		t.Errorf("the lost job's message: %s; want it to say the job was accepted, lost by the store, and to be submitted again", body)
	}
	code, body = g.serve(http.MethodDelete, "/v1/jobs/"+lost, settleKey, "")
	wantError(t, "DELETE the lost job", code, body, http.StatusGone, typeInvalidRequest, "job_lost")
	code, body = g.serve(http.MethodGet, "/v1/jobs/"+lost, globexKey, "") // its owner is lost with it
	wantError(t, "GET the lost job as another tenant", code, body, http.StatusGone, typeInvalidRequest, "job_lost")
	if got := testutil.ToFloat64(g.metrics.jobsLost); got != 1 {
		t.Errorf("sluice_gateway_jobs_lost_total = %v after three answers about one lost job; want 1", got)
	}

	after := g.addJob(t)
	if code, body := g.serve(http.MethodGet, "/v1/jobs/"+after, settleKey, ""); code != http.StatusOK {
		t.Errorf("GET a job added after the loss: %d %s", code, body)
	}
	code, body = g.serve(http.MethodGet, "/v1/jobs/"+lost, settleKey, "") // the store has a new epoch now
	wantError(t, "GET the lost job after another was added", code, body, http.StatusGone, typeInvalidRequest, "job_lost")
	for _, tc := range []struct{ what, id, key string }{
		{"a job of the store's epoch it never gave", neverGiven(after), settleKey},
		{"a random id", "job_" + rand.Text(), settleKey},
		{"a malformed id", "job_nope", settleKey},
		{"another tenant's job", after, globexKey},
	} {
		code, body := g.serve(http.MethodGet, "/v1/jobs/"+tc.id, tc.key, "")
		wantError(t, "GET "+tc.what, code, body, http.StatusNotFound, typeInvalidRequest, "job_not_found")
	}
	if got := testutil.ToFloat64(g.metrics.jobsLost); got != 1 {
		t.Errorf("sluice_gateway_jobs_lost_total = %v; want 1: nothing else was lost", got)
	}
}

// TestAJobRunningWhenItsStoreEmptiedIsCountedOnce takes a job, flushes the Redis that keeps it,
// and runs the attempt: the worker finds the job lost, logs it once at warn and counts it, and a
// poll of it afterwards does not count it again.
func TestAJobRunningWhenItsStoreEmptiedIsCountedOnce(t *testing.T) {
	g := newLostJobsGateway(t, noProvider)
	id := g.addJob(t)
	taken, cancel := context.WithTimeout(t.Context(), time.Minute) // bounds a job that never comes
	defer cancel()
	j, err := g.opts.Jobs.Take(taken)
	if err != nil || j.ID != id {
		t.Fatalf("Take() = %+v, %v; want job %s", j, err, id)
	}
	g.flush(t)
	g.runJob(t.Context(), j, &runningJobs{})
	code, body := g.serve(http.MethodGet, "/v1/jobs/"+id, settleKey, "")
	wantError(t, "GET the job lost while it ran", code, body, http.StatusGone, typeInvalidRequest, "job_lost")
	if got := testutil.ToFloat64(g.metrics.jobsLost); got != 1 {
		t.Errorf("sluice_gateway_jobs_lost_total = %v; want 1", got)
	}
	g.loggedLostOnce(t, id)
}

// loggedLostOnce checks that the log tells of job id's loss once, at warn, and of nothing else
// going wrong.
func (g *lostJobsGateway) loggedLostOnce(t *testing.T, id string) {
	t.Helper()
	log := g.log.String()
	if line := logLine(log, "a job was lost"); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "job="+id) {
		t.Errorf("log line %q; want a warning naming the job", line)
	}
	if n := strings.Count(log, "a job was lost"); n != 1 {
		t.Errorf("the loss is logged %d times; want once", n)
	}
	if strings.Contains(log, "level=ERROR") || strings.Contains(log, "another gateway took over") {
		t.Errorf("the log tells of more than the loss:\n%s", log)
	}
}

// TestAJobWhoseStoreEmptiedWhileItsCallIsOutIsAbandoned runs a job whose provider holds its
// call, and flushes the Redis that keeps the job meanwhile: the worker's renewal finds the job
// gone, counts it lost and abandons its attempt, which nobody would read.
func TestAJobWhoseStoreEmptiedWhileItsCallIsOutIsAbandoned(t *testing.T) {
	received := make(chan struct{}, 1)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // as a provider reads the call before it answers
		received <- struct{}{}
		<-r.Context().Done() // until the attempt is abandoned
	}))
	t.Cleanup(provider.Close)
	g := newLostJobsGateway(t, provider.URL)
	id := g.addJob(t)
	ctx, stop := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.RunJobs(ctx, 1, 10*time.Millisecond, time.Minute)
	}()
	select {
	case <-received:
	case <-time.After(time.Minute):
		t.Fatal("the job's call never reached its provider")
	}
	g.flush(t)
	poll.Until(t, 10*time.Second, "the lost job to be counted", func() bool { return testutil.ToFloat64(g.metrics.jobsLost) == 1 })
	stop()
	<-stopped // within the grace: the abandoned attempt has ended
	g.loggedLostOnce(t, id)
}

// neverGiven is an id the store never gave, of the same epoch as id: its last character changed.
func neverGiven(id string) string {
	last := "A"
	if strings.HasSuffix(id, last) {
		last = "B"
	}
	return id[:len(id)-1] + last
}

func TestLostJobsAreRememberedUpToTheirBound(t *testing.T) {
	var l lostJobs
	if !l.first("job_a") || l.first("job_a") {
		t.Fatal("first() of one id twice; want true, then false")
	}
	for i := range maxLostJobs {
		l.first(strings.Repeat("x", i+1))
	}
	if len(l.seen) != maxLostJobs || len(l.order) != maxLostJobs {
		t.Errorf("%d ids remembered, %d in order; want the bound, %d", len(l.seen), len(l.order), maxLostJobs)
	}
	if !l.first("job_a") {
		t.Error("first() of the oldest id after the bound forgot it = false; want true")
	}
}
