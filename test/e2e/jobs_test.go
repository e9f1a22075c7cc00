package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// jobsConfig writes a configuration for jobs: tenant acme (keyAlice, 100,000 tokens a day) and
// globex (keyBob) on provider "stub" at upstreamURL, with store and jobs as YAML lines ("" for
// the defaults). The provider does not retry within an attempt, so every arrival is an attempt.
func jobsConfig(t *testing.T, upstreamURL, store, jobs string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
server:
  maxBodyBytes: 4096
%s
%s
providers:
  - name: stub
    baseURL: %s/v1
    models:
      - {name: gpt-4o-mini, encoding: o200k_base}
    requestsPerMinute: 1000
    tokensPerMinute: 1000000
    maxInFlight: 10
    prices: {inputPerMillion: "3.00", outputPerMillion: "15.00"}
    retry: {maxAttempts: 1}
tenants:
  - name: acme
    keys: [{sha256: %s, user: alice}]
    providers: [stub]
    perTenant:
      - {dimension: tokens, amount: 100000, per: day}
  - name: globex
    keys: [{sha256: %s, user: bob}]
    providers: [stub]
`, store, jobs, upstreamURL, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyBob))
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func redisStore(addr string) string {
	return "store:\n  type: redis\n  redis: {address: \"" + addr + "\", replicas: 2}"
}

const chatJob = `{"endpoint": "/v1/chat/completions", "body": ` + chatBody + `}`

// job is a job as the gateway answers it.
type job struct {
	ID       string
	Object   string
	Endpoint string
	Status   string
	Attempts int
	Response *struct {
		StatusCode int `json:"status_code"`
		Body       json.RawMessage
	}
	Error *struct{ Message string }
}

func (g *gateway) request(t *testing.T, method, path, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, g.api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

func (a answer) job(t *testing.T) job {
	t.Helper()
	var j job
	if err := json.Unmarshal(a.body, &j); err != nil || j.ID == "" {
		t.Fatalf("answer %d is not a job: %s", a.status, a.body)
	}
	return j
}

func (g *gateway) addJob(t *testing.T, key, body string) job {
	t.Helper()
	a := g.post(t, "/v1/jobs", key, body)
	if a.status != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs: %d %s; want 202", a.status, a.body)
	}
	j := a.job(t)
	if j.Status != "queued" || j.Object != "job" {
		t.Fatalf("a new job is %+v; want it queued", j)
	}
	return j
}

// waitForJob polls a job until it is in a final state and returns it.
func (g *gateway) waitForJob(t *testing.T, key, id string) job {
	t.Helper()
	var j job
	poll.Until(t, processWait, "job "+id+" to finish", func() bool {
		j = g.request(t, http.MethodGet, "/v1/jobs/"+id, key, "").job(t)
		return j.Status == "succeeded" || j.Status == "failed" || j.Status == "cancelled"
	})
	return j
}

func TestJobsRunAndAnswer(t *testing.T) {
	up := newUpstream(t)
	g := startGateway(t, jobsConfig(t, up.URL, "", ""))

	added := g.addJob(t, keyAlice, chatJob)
	done := g.waitForJob(t, keyAlice, added.ID)
	if done.Status != "succeeded" || done.Endpoint != "/v1/chat/completions" || done.Attempts != 1 || done.Response == nil || done.Response.StatusCode != 200 ||
		!strings.Contains(string(done.Response.Body), "Hello there!") {
		t.Fatalf("the job ended %+v; want succeeded at its first attempt with the provider's answer", done)
	}
	if a := g.request(t, http.MethodGet, "/v1/jobs/"+added.ID, keyBob, ""); a.status != http.StatusNotFound {
		t.Errorf("another tenant reads the job: %d %s; want 404", a.status, a.body)
	}
	if a := g.request(t, http.MethodDelete, "/v1/jobs/"+added.ID, keyAlice, ""); a.status != http.StatusConflict || a.errorCode(t) != "job_finished" {
		t.Errorf("cancelling a finished job: %d %s; want 409 job_finished", a.status, a.body)
	}
	var list struct{ Data []job }
	json.Unmarshal(g.request(t, http.MethodGet, "/v1/jobs?state=succeeded", keyAlice, "").body, &list)
	if len(list.Data) != 1 || list.Data[0].ID != added.ID {
		t.Errorf("acme's succeeded jobs: %+v; want the one job", list.Data)
	}
	json.Unmarshal(g.request(t, http.MethodGet, "/v1/jobs", keyBob, "").body, &list)
	if len(list.Data) != 0 {
		t.Errorf("globex's jobs: %+v; want none: acme's are not its own", list.Data)
	}

	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", http.MethodPost, "/v1/jobs", `{"endpoint":`, 400, "invalid_request"},
		{"unknown endpoint", http.MethodPost, "/v1/jobs", `{"endpoint": "/v1/images/generations", "body": {}}`, 400, "invalid_endpoint"},
		{"unknown model", http.MethodPost, "/v1/jobs", `{"endpoint": "/v1/chat/completions", "body": {"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}}`, 404, "model_not_found"},
		{"a stream", http.MethodPost, "/v1/jobs", `{"endpoint": "/v1/chat/completions", "body": {"model": "gpt-4o-mini", "stream": true, "messages": []}}`, 400, "invalid_request"},
		{"body over the limit", http.MethodPost, "/v1/jobs", `{"endpoint": "/v1/chat/completions", "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 5000) + `"}]}}`, 413, "request_too_large"},
		{"unknown state", http.MethodGet, "/v1/jobs?state=lost", "", 400, "invalid_request"},
		{"unknown job", http.MethodGet, "/v1/jobs/job_nope", "", 404, "job_not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := g.request(t, tc.method, tc.path, keyAlice, tc.body)
			if a.status != tc.status || a.errorCode(t) != tc.code {
				t.Errorf("got %d %s; want %d with code %s", a.status, a.body, tc.status, tc.code)
			}
		})
	}
	if a := g.request(t, http.MethodGet, "/v1/jobs", "sk-nobody", ""); a.status != http.StatusUnauthorized {
		t.Errorf("an unknown key lists jobs: %d; want 401", a.status)
	}
}

// holdingUpstream is the test's upstream, except that it holds the first call whose body holds
// marker until release is called, then answers it, or until the caller goes away. The call is
// released when the test ends.
func holdingUpstream(t *testing.T, marker string) (u *upstream, held <-chan struct{}, release func()) {
	u = &upstream{}
	heldCh, released := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		first := false
		if strings.Contains(string(body), marker) {
			once.Do(func() { first = true })
		}
		if first {
			close(heldCh)
			select {
			case <-released:
			case <-r.Context().Done():
				u.calls.Add(1)
				return
			}
		}
		u.serve(w, r)
	}))
	t.Cleanup(u.Close)
	t.Cleanup(release)
	return u, heldCh, release
}

// TestJobSurvivesTheKillOfItsGateway kills (SIGKILL) the gateway that runs a job, with the job's
// call at the provider; another gateway on the same Redis reclaims the job, runs it again and
// finishes it, and the tenant is charged for it once.
func TestJobSurvivesTheKillOfItsGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up, held, _ := holdingUpstream(t, "Say hello as a job.")
	redis := redisserver.Start(t)
	config := jobsConfig(t, up.URL, redisStore(redis.Addr), "jobs: {maxAttempts: 3, reclaimAfter: 1s}")
	a := startGateway(t, config)

	// A live call first: its headers show what the chat body is estimated at, and it settles at
	// the provider's 10 tokens.
	probe := a.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if probe.status != http.StatusOK {
		t.Fatalf("live call: %d %s", probe.status, probe.body)
	}
	estimate := 100000 - probe.int(t, "X-Ratelimit-Remaining-Tokens")

	added := a.addJob(t, keyAlice, `{"endpoint": "/v1/chat/completions", "body": `+strings.Replace(chatBody, "Say hello.", "Say hello as a job.", 1)+`}`)
	<-held // the job's call is at the provider
	if err := syscall.Kill(a.proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.proc.Exited()

	b := startGateway(t, config)
	done := b.waitForJob(t, keyAlice, added.ID)
	if done.Status != "succeeded" || done.Attempts != 2 || !strings.Contains(string(done.Response.Body), "Hello there!") {
		t.Fatalf("the job ended %+v; want succeeded at its second attempt", done)
	}
	if got := up.calls.Load(); got != 3 {
		t.Errorf("the provider got %d calls; want 3: the live one and the job's two attempts", got)
	}

	// Both calls so far settled at 10 tokens; the first attempt's estimate, left by the dead
	// gateway, was given back. This call's own estimate is the probe's.
	after := b.post(t, "/v1/chat/completions", keyAlice, chatBody)
	if got, want := after.int(t, "X-Ratelimit-Remaining-Tokens"), 100000-2*(upstreamPrompt+upstreamCompletion)-estimate; got != want {
		t.Errorf("tokens left after the job = %d; want %d: the job charged once, at 10 tokens (the estimate is %d)", got, want, estimate)
	}
}

// TestPoisonJobFails sends a job the provider always answers 500: it fails after its attempts,
// and the failed list and a metric show it.
func TestPoisonJobFails(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	var calls int64
	var mu sync.Mutex
	poison := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"The model crashed on this input.","type":"server_error","code":null}}`)
	}))
	t.Cleanup(poison.Close)
	redis := redisserver.Start(t)
	g := startGateway(t, jobsConfig(t, poison.URL, redisStore(redis.Addr), "jobs: {maxAttempts: 3, reclaimAfter: 1s}"))

	added := g.addJob(t, keyAlice, chatJob)
	done := g.waitForJob(t, keyAlice, added.ID)
	// The provider's 5xx body is its internals: the job's error is the gateway's word for it.
	if done.Status != "failed" || done.Attempts != 3 || done.Error == nil || !strings.Contains(done.Error.Message, "gave up after 3 attempts") ||
		!strings.Contains(done.Error.Message, "failed the call (500)") || strings.Contains(done.Error.Message, "The model crashed") {
		t.Fatalf("the poison job ended %+v; want failed after 3 attempts with the provider's status, not its body", done)
	}
	mu.Lock()
	if calls != 3 {
		t.Errorf("the provider got %d calls; want one per attempt, 3", calls)
	}
	mu.Unlock()
	var list struct{ Data []job }
	json.Unmarshal(g.request(t, http.MethodGet, "/v1/jobs?state=failed", keyAlice, "").body, &list)
	if len(list.Data) != 1 || list.Data[0].ID != added.ID {
		t.Errorf("acme's failed jobs: %+v; want the poison job", list.Data)
	}
	if m := g.metrics(t); !strings.Contains(m, `sluice_gateway_jobs_ended_total{state="failed",tenant="acme"} 1`) {
		t.Errorf("the metrics do not count the failed job:\n%s", grep(m, "sluice_gateway_job"))
	}
	for _, u := range g.usage(t).Tenants {
		if u.Name == "acme" && (u.TokensLastMinute != 0 || u.InFlight != 0 || !u.SpendThisPeriod.IsZero()) {
			t.Errorf("acme after three attempts the provider failed: %d tokens, %d in flight, $%s spent; want nothing charged and nothing held",
				u.TokensLastMinute, u.InFlight, u.SpendThisPeriod)
		}
	}
}

func grep(text, prefix string) string {
	var out strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			out.WriteString(line)
		}
	}
	return out.String()
}

// TestGatewayHonoursRetryAfter has the provider answer 429 once, asking for a wait in
// retry-after-ms or retry-after, then 200: the gateway's retry reaches the provider no sooner
// than asked, as the provider's own clock measures.
func TestGatewayHonoursRetryAfter(t *testing.T) {
	cases := []struct {
		name, header, value string
		asked               time.Duration
	}{
		{"retry-after-ms", "Retry-After-Ms", "700", 700 * time.Millisecond},
		{"retry-after in seconds", "Retry-After", "1", time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t)
			var mu sync.Mutex
			var arrivals []time.Time
			throttling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				first := len(arrivals) == 1
				mu.Unlock()
				if first {
					w.Header().Set(tc.header, tc.value)
					w.WriteHeader(http.StatusTooManyRequests)
					fmt.Fprint(w, `{"error":{"message":"Slow down.","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
					return
				}
				up.serve(w, r)
			}))
			t.Cleanup(throttling.Close)
			config := jobsConfig(t, throttling.URL, "", "")
			data, _ := os.ReadFile(config)
			writeAtomically(t, config, strings.Replace(string(data), "retry: {maxAttempts: 1}", "retry: {maxAttempts: 3}", 1))
			g := startGateway(t, config)

			if a := g.post(t, "/v1/chat/completions", keyAlice, chatBody); a.status != http.StatusOK {
				t.Fatalf("call: %d %s; want 200 after the gateway's retry", a.status, a.body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(arrivals) != 2 {
				t.Fatalf("the provider got %d calls; want 2: the throttled one and the retry", len(arrivals))
			}
			waited := arrivals[1].Sub(arrivals[0])
			t.Logf("asked %s; the retry arrived %s after the throttled call", tc.asked, waited)
			if waited < tc.asked {
				t.Errorf("the retry came %s after the throttled call; want at least the %s asked", waited, tc.asked)
			}
		})
	}
}

// TestJobFinishesWhenItsGatewayStops stops (SIGTERM) the gateway that runs a job, with the job's
// call at the provider: the gateway takes no other job, lets the attempt finish and records it
// before it exits, so the job succeeds at its first attempt.
func TestJobFinishesWhenItsGatewayStops(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up, held, release := holdingUpstream(t, "Say hello as a job.")
	redis := redisserver.Start(t)
	g := startGateway(t, jobsConfig(t, up.URL, redisStore(redis.Addr), "jobs: {reclaimAfter: 1s, workers: 1}"))
	running := g.addJob(t, keyAlice, `{"endpoint": "/v1/chat/completions", "body": `+strings.Replace(chatBody, "Say hello.", "Say hello as a job.", 1)+`}`)
	<-held // the job's call is at the provider
	waiting := g.addJob(t, keyAlice, chatJob)

	if err := syscall.Kill(g.proc.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, processWait, "the gateway to stop serving", func() bool {
		resp, err := http.Get(g.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	release()
	<-g.proc.Exited()

	type storedJob struct {
		State    string
		Attempts int
	}
	stored := func(id string) storedJob {
		t.Helper()
		data, err := redis.Client(t).HGet(t.Context(), "{sluice-jobs}:job:"+id, "job").Bytes()
		var j storedJob
		if err == nil {
			err = json.Unmarshal(data, &j)
		}
		if err != nil {
			t.Fatalf("read job %s from Redis: %v", id, err)
		}
		return j
	}
	if j := stored(running.ID); j.State != "succeeded" || j.Attempts != 1 {
		t.Errorf("the running job is %s after %d attempts; want succeeded at its first: its attempt finished before the gateway exited", j.State, j.Attempts)
	}
	if j := stored(waiting.ID); j.State != "queued" || j.Attempts != 0 {
		t.Errorf("the waiting job is %s after %d attempts; want queued: a stopping gateway takes no job", j.State, j.Attempts)
	}
	if got := up.calls.Load(); got != 1 {
		t.Errorf("the provider got %d calls; want 1", got)
	}
}

// TestJobsQueuedPerTenantAreBounded keeps the one worker busy and fills acme's queue: a job past
// jobs.maxQueuedPerTenant is refused with 429, and another tenant's is taken.
func TestJobsQueuedPerTenantAreBounded(t *testing.T) {
	up, held, release := holdingUpstream(t, "Say hello as a job.")
	g := startGateway(t, jobsConfig(t, up.URL, "", "jobs: {workers: 1, maxQueuedPerTenant: 1}"))
	t.Cleanup(release) // before the gateway stops, which waits for the attempt
	g.addJob(t, keyAlice, `{"endpoint": "/v1/chat/completions", "body": `+strings.Replace(chatBody, "Say hello.", "Say hello as a job.", 1)+`}`)
	<-held // running, so no longer queued
	g.addJob(t, keyAlice, chatJob)
	if a := g.post(t, "/v1/jobs", keyAlice, chatJob); a.status != http.StatusTooManyRequests || a.errorCode(t) != "too_many_jobs" {
		t.Errorf("a job past acme's queue: %d %s; want 429 too_many_jobs", a.status, a.body)
	}
	g.addJob(t, keyBob, chatJob)
}

// TestJobAnswerTooLargeFails has the provider answer a job with more than jobs.maxResultBytes: the
// job fails at once rather than succeeding with a truncated answer.
func TestJobAnswerTooLargeFails(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"%s"}}]}`,
			strings.Repeat("x", 2000))
	}))
	t.Cleanup(huge.Close)
	g := startGateway(t, jobsConfig(t, huge.URL, "", "jobs: {maxAttempts: 3, maxResultBytes: 1000}"))
	added := g.addJob(t, keyAlice, chatJob)
	done := g.waitForJob(t, keyAlice, added.ID)
	if done.Status != "failed" || done.Attempts != 1 || done.Error == nil || !strings.Contains(done.Error.Message, "response too large") {
		t.Fatalf("the job ended %+v; want failed at its first attempt, its response too large", done)
	}
}

// TestJobAttemptHasADeadline has the provider send its headers and part of its answer, then
// stall: the attempt ends at its deadline instead of holding its worker.
func TestJobAttemptHasADeadline(t *testing.T) {
	stalling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","choices":[`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(stalling.Close)
	config := jobsConfig(t, stalling.URL, "", "jobs: {maxAttempts: 1}")
	data, _ := os.ReadFile(config)
	writeAtomically(t, config, strings.Replace(string(data), "retry: {maxAttempts: 1}", "retry: {maxAttempts: 1}\n    timeout: 1s", 1))
	g := startGateway(t, config)
	added := g.addJob(t, keyAlice, chatJob)
	done := g.waitForJob(t, keyAlice, added.ID)
	if done.Status != "failed" || done.Error == nil || !strings.Contains(done.Error.Message, "did not answer within") {
		t.Fatalf("the job ended %+v; want failed: the provider did not answer within the attempt's deadline", done)
	}
}

// editConfig replaces old, which must be there, with new in the configuration file at path.
func editConfig(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("the configuration has no %q to replace", old)
	}
	writeAtomically(t, path, strings.Replace(string(data), old, new, 1))
}

const acmeDailyTokens = "      - {dimension: tokens, amount: 100000, per: day}"

// TestATenantOverItsLimitsHoldsNoWorker has acme send three jobs when its tokens an hour hold
// one call's estimate, on a gateway with two workers: the two refused by acme's own limit go back
// to the queue, uncounted, and globex's job runs meanwhile.
func TestATenantOverItsLimitsHoldsNoWorker(t *testing.T) {
	up := newUpstream(t)
	config := jobsConfig(t, up.URL, "", "jobs: {workers: 2}")
	editConfig(t, config, acmeDailyTokens, acmeDailyTokens+fmt.Sprintf("\n      - {dimension: tokens, amount: %d, per: hour}", chatEstimate+5))
	g := startGateway(t, config)
	acme := []job{g.addJob(t, keyAlice, chatJob), g.addJob(t, keyAlice, chatJob), g.addJob(t, keyAlice, chatJob)}
	globex := g.waitForJob(t, keyBob, g.addJob(t, keyBob, chatJob).ID)
	if globex.Status != "succeeded" {
		t.Fatalf("globex's job ended %+v; want succeeded while acme waits on its own limit", globex)
	}
	var states []string
	for _, j := range acme {
		got := g.request(t, http.MethodGet, "/v1/jobs/"+j.ID, keyAlice, "").job(t)
		states = append(states, fmt.Sprintf("%s after %d attempts", got.Status, got.Attempts))
	}
	slices.Sort(states)
	want := []string{"queued after 0 attempts", "queued after 0 attempts", "succeeded after 1 attempts"}
	if !slices.Equal(states, want) {
		t.Errorf("acme's jobs are %v; want %v: those its limit refused wait uncounted", states, want)
	}
}

// TestJobsHoldBoundedBytes keeps the one worker busy: a job body past jobs.maxBodyBytes is
// refused with 413, and a job past jobs.maxBytesPerTenant with 429, while another tenant's is
// taken.
func TestJobsHoldBoundedBytes(t *testing.T) {
	up, held, release := holdingUpstream(t, "Say hello as a job.")
	g := startGateway(t, jobsConfig(t, up.URL, "", "jobs: {workers: 1, maxBodyBytes: 150, maxBytesPerTenant: 250}"))
	t.Cleanup(release) // before the gateway stops, which waits for the attempt
	large := `{"endpoint": "/v1/chat/completions", "body": ` + strings.Replace(chatBody, "Say hello.", strings.Repeat("Say hello. ", 10), 1) + `}`
	if a := g.post(t, "/v1/jobs", keyAlice, large); a.status != http.StatusRequestEntityTooLarge || a.errorCode(t) != "request_too_large" {
		t.Errorf("a job body past jobs.maxBodyBytes: %d %s; want 413 request_too_large", a.status, a.body)
	}
	g.addJob(t, keyAlice, `{"endpoint": "/v1/chat/completions", "body": `+strings.Replace(chatBody, "Say hello.", "Say hello as a job.", 1)+`}`)
	<-held // running: its body is still kept
	g.addJob(t, keyAlice, chatJob)
	a := g.post(t, "/v1/jobs", keyAlice, chatJob)
	if a.status != http.StatusTooManyRequests || a.errorCode(t) != "too_many_jobs" || !strings.Contains(string(a.body), "bytes") {
		t.Errorf("a job past acme's bytes: %d %s; want 429 too_many_jobs about bytes", a.status, a.body)
	}
	g.addJob(t, keyBob, chatJob)
}

// TestJobsAreSeenByTheirUserAndTenant gives acme a second user and jobScope User: carol neither
// reads, lists nor cancels alice's job. Then acme is created again (a new uid) under its name:
// alice no longer sees the job of the acme that was.
func TestJobsAreSeenByTheirUserAndTenant(t *testing.T) {
	up, _, release := holdingUpstream(t, "Say hello as a job.")
	config := jobsConfig(t, up.URL, "", "jobs: {workers: 1}")
	aliceKey := fmt.Sprintf("    keys: [{sha256: %s, user: alice}]", gatewayv1.HashKey(keyAlice))
	acmeAs := func(uid string) string {
		return fmt.Sprintf("    uid: %s\n    jobScope: User\n    keys: [{sha256: %s, user: alice}, {sha256: %s, user: carol}]",
			uid, gatewayv1.HashKey(keyAlice), gatewayv1.HashKey(keyCarol))
	}
	editConfig(t, config, aliceKey, acmeAs("plan-1/acme"))
	g := startGateway(t, config)
	t.Cleanup(release)
	added := g.addJob(t, keyAlice, `{"endpoint": "/v1/chat/completions", "body": `+strings.Replace(chatBody, "Say hello.", "Say hello as a job.", 1)+`}`)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if a := g.request(t, method, "/v1/jobs/"+added.ID, keyCarol, ""); a.status != http.StatusNotFound {
			t.Errorf("%s of alice's job by carol: %d %s; want 404", method, a.status, a.body)
		}
	}
	if got := g.listJobs(t, keyCarol); len(got) != 0 {
		t.Errorf("carol lists %v; want none of alice's jobs", got)
	}
	if got := g.listJobs(t, keyAlice); !slices.Equal(got, []string{added.ID}) {
		t.Errorf("alice lists %v; want her job", got)
	}

	editConfig(t, config, acmeAs("plan-1/acme"), acmeAs("plan-2/acme"))
	poll.Until(t, processWait, "the acme created again to be in force", func() bool {
		return g.request(t, http.MethodGet, "/v1/jobs/"+added.ID, keyAlice, "").status == http.StatusNotFound
	})
	if got := g.listJobs(t, keyAlice); len(got) != 0 {
		t.Errorf("alice of the new acme lists %v; want none of the old acme's jobs", got)
	}
}

// listJobs lists the ids of the jobs key sees.
func (g *gateway) listJobs(t *testing.T, key string) []string {
	t.Helper()
	var list struct{ Data []job }
	a := g.request(t, http.MethodGet, "/v1/jobs", key, "")
	if err := json.Unmarshal(a.body, &list); err != nil || a.status != http.StatusOK {
		t.Fatalf("GET /v1/jobs: %d %s", a.status, a.body)
	}
	ids := []string{}
	for _, j := range list.Data {
		ids = append(ids, j.ID)
	}
	return ids
}

// TestJobsChurnedThroughTwoGatewaysAreBounded has clients create and cancel jobs in a loop,
// every other call through each of two gateways that share Redis: a user allowed 20 requests a
// minute is refused at its 21st job, whichever gateway takes it, and 2,000 jobs of another
// tenant leave no more than 1,000 in Redis.
func TestJobsChurnedThroughTwoGatewaysAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and the gateway binary; skipped with -short")
	}
	up := newUpstream(t)
	redis := redisserver.Start(t)
	config := jobsConfig(t, up.URL, redisStore(redis.Addr), "jobs: {workers: 1}")
	editConfig(t, config, acmeDailyTokens, acmeDailyTokens+"\n    perUser:\n      - {dimension: requests, amount: 20, per: minute, onLimit: Reject}")
	gateways := []*gateway{startGateway(t, config), startGateway(t, config)}
	churn := func(key string, n int) (created int) {
		for i := range n {
			g := gateways[i%2]
			a := g.post(t, "/v1/jobs", key, chatJob)
			if a.status != http.StatusAccepted {
				if a.status != http.StatusTooManyRequests || a.errorCode(t) != "rate_limit_exceeded" {
					t.Fatalf("job %d: %d %s; want 202, or 429 rate_limit_exceeded", i+1, a.status, a.body)
				}
				return created
			}
			created++
			g.request(t, http.MethodDelete, "/v1/jobs/"+a.job(t).ID, key, "")
		}
		return created
	}
	if created := churn(keyAlice, 100); created != 20 {
		t.Errorf("alice created %d jobs in a row through two gateways; want 20, her requests a minute", created)
	}
	churn(keyBob, 2000)
	keys, err := redis.Client(t).Keys(context.Background(), "{sluice-jobs}:job:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Redis holds %d jobs", len(keys))
	if len(keys) > 1000+20 {
		t.Errorf("Redis holds %d jobs after 2,000 of globex's and 20 of acme's were created and cancelled; want at most 1,020", len(keys))
	}
}
