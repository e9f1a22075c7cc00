package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// The settle table's limits: a day's requests per user, a day's tokens for the tenant, a
// month's budget in dollars, and calls in flight at the provider. Prices are $1 and $2 a
// million tokens, so a token in is one micro-dollar and a token out two.
const (
	settleRequestsPerDay = 100
	settleTokensPerDay   = 1_000_000
	settleBudget         = "10.00"
	settleBudgetMicros   = 10_000_000
	settleMaxInFlight    = 4
	settleKey            = "sk-acme-alice"
)

// settleBody is every call of the table: a short chat completion of at most 50 tokens.
const settleBody = `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello."}]}`

// settleConfig is a gateway in front of a provider at url with the settle table's limits.
func settleConfig(url string) *gatewayv1.Config {
	reject := gatewayv1.BehaviorReject
	cfg := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name: "lab", BaseURL: url + "/v1", MaxInFlight: settleMaxInFlight,
			Models: []gatewayv1.Model{{Name: "m", Encoding: "o200k_base"}},
			Prices: gatewayv1.Prices{InputPerMillion: "1.00", OutputPerMillion: "2.00"},
			Retry:  gatewayv1.Retry{MaxAttempts: 1},
			// Short enough that a stalled answer ends the test quickly; nothing asserts them.
			Timeout:      metav1.Duration{Duration: time.Second},
			StallTimeout: metav1.Duration{Duration: 200 * time.Millisecond},
			CallTimeout:  metav1.Duration{Duration: time.Second},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name: "acme", Providers: []string{"lab"},
			Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey(settleKey), User: "alice"}},
			PerUser:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: settleRequestsPerDay, Per: gatewayv1.PeriodDay, OnLimit: reject}},
			PerTenant: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionTokens, Amount: settleTokensPerDay, Per: gatewayv1.PeriodDay, OnLimit: reject}},
			Budget:    &gatewayv1.Budget{Amount: settleBudget, Period: gatewayv1.PeriodMonth},
		}},
	}
	cfg.Default()
	return cfg
}

// charged is what a call took from the tenant's limits once it ended.
type charged struct{ requests, tokens, micros int64 }

// settleGateway is a server on the memory store, with the settle table's limits, in front of
// provider, at a fixed time.
type settleGateway struct {
	*Server
	limiter *ratelimit.Memory
	jobs    *jobs.Memory
	policy  *policy.Policy
}

func newSettleGateway(t *testing.T, providerURL string) *settleGateway {
	t.Helper()
	return newSettleGatewayFrom(t, settleConfig(providerURL))
}

// newSettleGatewayFrom is newSettleGateway with a configuration of the test's own.
func newSettleGatewayFrom(t testing.TB, cfg *gatewayv1.Config) *settleGateway {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return newSettleGatewayAt(t, cfg, func() time.Time { return now })
}

// newSettleGatewayAt is newSettleGatewayFrom at the time now tells.
func newSettleGatewayAt(t testing.TB, cfg *gatewayv1.Config, now func() time.Time) *settleGateway {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := &settleGateway{limiter: ratelimit.NewMemory(), jobs: jobs.NewMemory(jobs.Options{MaxAttempts: 3, ReclaimAfter: time.Millisecond}), policy: p}
	g.Server = New(Options{Limiter: g.limiter, Jobs: g.jobs, Now: now})
	g.SetPolicy(p)
	t.Cleanup(g.Close)
	return g
}

// charged reads what the tenant's limits have lost, and fails the test if the call's slot in
// flight was not given back.
func (g *settleGateway) charged(t *testing.T) charged {
	t.Helper()
	caller, route := g.policy.Caller(settleKey), g.policy.Routes("m")[0]
	checks, _ := policy.Checks(nil, caller, route, gatewayv1.EndpointChat, policy.Cost{}, policy.Shared, "")
	for i := range checks {
		checks[i].Cost = 0 // read, take nothing
	}
	var d ratelimit.Decision
	if err := g.limiter.Decide(context.Background(), checks, g.opts.Now(), &d); err != nil {
		t.Fatal(err)
	}
	var out charged
	for i, c := range checks {
		used := c.Limit.Capacity() - d.Remaining[i]
		switch l := c.Limit; {
		case l.Dimension == ratelimit.InFlight:
			if used != 0 {
				t.Errorf("%d slots in flight at %s after the call ended; want 0", used, l.Key)
			}
		case l.Level == ratelimit.LevelUser && l.Dimension == ratelimit.Requests:
			out.requests = used
		case l.Level == ratelimit.LevelTenant && l.Dimension == ratelimit.Tokens:
			out.tokens = used
		case l.Level == ratelimit.LevelTenant && l.Dimension == ratelimit.MicroDollars:
			out.micros = used
		}
	}
	return out
}

// estimated is what the table's call is charged at admission: its estimate.
func (g *settleGateway) estimated(t *testing.T) charged {
	t.Helper()
	c, apiErr := g.newCall(context.Background(), g.policy, g.policy.Caller(settleKey), "chat", []byte(settleBody))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	return charged{requests: 1, tokens: c.cost.Tokens, micros: c.cost.MicroDollars}
}

// call sends the table's call, streamed or not, and returns the answer's status and body.
func (g *settleGateway) call(ctx context.Context, stream bool) (int, string) {
	body := settleBody
	if stream {
		body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// jobDeliveredTwice sends the table's call as a job, and runs it twice as two replicas would when
// the first lost the job after its call was served: the first attempt's end is never recorded, the
// job is taken again, and its second attempt is served too. It returns the status of the job's
// result and the result.
func (g *settleGateway) jobDeliveredTwice(ctx context.Context, _ bool) (int, string) {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/jobs", strings.NewReader(`{"endpoint":"/v1/chat/completions","body":`+settleBody+`}`))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	w := httptest.NewRecorder()
	g.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusAccepted {
		return w.Code, w.Body.String()
	}
	var outcome jobs.Outcome
	for delivery := range 2 {
		taken, cancel := context.WithTimeout(ctx, time.Minute) // bounds a job that never comes back
		j, err := g.jobs.Take(taken)
		cancel()
		if err != nil {
			return 0, err.Error()
		}
		outcome = g.attempt(ctx, j)
		if delivery == 0 { // lost: the job comes back as its attempt failed
			outcome = jobs.Outcome{Err: "the replica running it stopped", Retry: true}
		}
		if _, err := g.jobs.Finish(ctx, j.Attempt(), outcome); err != nil {
			return 0, err.Error()
		}
	}
	return outcome.Status, string(outcome.Result) + outcome.Err
}

// longText is a completion longer than a stream line the gateway reads for usage.
var longText = strings.Repeat("a", 2*maxObservedLine)

// streamChunk is one SSE chunk of a streamed completion carrying text.
func streamChunk(text string) string {
	return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", text)
}

// sendStream starts a stream answer and sends chunks, flushed.
func sendStream(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		io.WriteString(w, streamChunk(c))
	}
	w.(http.Flusher).Flush()
}

// tooLargeAnswer is an answer longer than the gateway reads to settle, made once: making it
// in the provider's handler could take longer than the provider's timeout.
var tooLargeAnswer = `{"choices":[{"message":{"content":"` + strings.Repeat("a", maxResponseBytes) + `"}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`

// TestEveryWayACallEndsChargesWhatItShould runs one call to each way a provider can answer, or
// not, and asserts the requests, tokens and dollars the tenant was charged, and that the call's
// slot in flight is free.
func TestEveryWayACallEndsChargesWhatItShould(t *testing.T) {
	usage := charged{requests: 1, tokens: 10 + 20, micros: 10*1 + 20*2}
	nothing := charged{}
	tests := []struct {
		name     string
		provider http.HandlerFunc // nil: nobody listens
		stream   bool
		leaves   bool // the client leaves once the provider has the call
		job      bool // sent as a job, which the provider serves twice: its first delivery lost
		large    bool // an answer so large its passing on may outlast the table's short timeouts
		want     func(g *settleGateway, answer string) charged
		status   int
		answer   string // in the body the client received
	}{
		{
			name: "200 with usage",
			provider: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
			},
			want:   func(*settleGateway, string) charged { return usage },
			status: http.StatusOK,
		},
		{
			name: "200 without usage is charged its estimate",
			provider: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}]}`)
			},
			status: http.StatusOK,
		},
		{
			name: "500 is refunded",
			provider: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
			},
			want:   func(*settleGateway, string) charged { return nothing },
			status: http.StatusInternalServerError,
		},
		{
			name: "401 is refunded",
			provider: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			},
			want:   func(*settleGateway, string) charged { return nothing },
			status: http.StatusBadGateway,
			answer: "provider_auth_failed",
		},
		{
			name:   "connection refused is refunded",
			want:   func(*settleGateway, string) charged { return nothing },
			status: http.StatusBadGateway,
			answer: "provider_unreachable",
		},
		{
			name: "an answer too large to read is charged its estimate",
			provider: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, tooLargeAnswer)
			},
			large:  true,
			status: http.StatusOK,
		},
		{
			name:   "a stream cut off is charged what it sent",
			stream: true,
			provider: func(w http.ResponseWriter, r *http.Request) {
				sendStream(w, "Hello", " world")
				panic(http.ErrAbortHandler) // the connection drops mid-stream
			},
			want:   streamed("Hello", " world"),
			status: http.StatusOK,
			answer: "provider_stream_broken",
		},
		{
			name:   "a stream line too long to read for usage passes whole, and the usage chunk settles it",
			stream: true,
			provider: func(w http.ResponseWriter, r *http.Request) {
				sendStream(w, longText)
				io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n")
			},
			want:   func(*settleGateway, string) charged { return usage },
			status: http.StatusOK,
			answer: streamChunk(longText),
		},
		{
			name:   "a stream that stalls is cut at stallTimeout and charged what it sent",
			stream: true,
			provider: func(w http.ResponseWriter, r *http.Request) {
				sendStream(w, "Hello")
				<-r.Context().Done()
			},
			want:   streamed("Hello"),
			status: http.StatusOK,
			answer: "provider_timeout",
		},
		{
			name:   "a stream that never ends is cut at callTimeout and charged what it sent",
			stream: true,
			provider: func(w http.ResponseWriter, r *http.Request) {
				for {
					sendStream(w, "Hello")
					select {
					case <-r.Context().Done():
						return
					case <-time.After(50 * time.Millisecond): // well within stallTimeout
					}
				}
			},
			want: func(g *settleGateway, answer string) charged {
				sent := strings.Count(answer, streamChunk("Hello"))
				return streamed(slices.Repeat([]string{"Hello"}, sent)...)(g, answer)
			},
			status: http.StatusOK,
			answer: "callTimeout",
		},
		{
			name: "an answer that stalls is cut at stallTimeout and charged its estimate",
			provider: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				io.WriteString(w, `{"choices":`)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			},
			status: http.StatusGatewayTimeout,
			answer: "provider_timeout",
		},
		{
			name: "a job delivered twice is charged once",
			job:  true,
			provider: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"choices":[{"message":{"content":"Hello."}}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
			},
			want:   func(*settleGateway, string) charged { return usage },
			status: http.StatusOK,
		},
		{
			name:   "a client that leaves after the call went out is charged its estimate",
			leaves: true,
			provider: func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done() // the gateway hangs up as its client left
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			received := make(chan struct{}, 1)
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) // as a provider reads the call before it answers
				select {
				case received <- struct{}{}:
				default:
				}
				tc.provider(w, r)
			}))
			t.Cleanup(provider.Close)
			if tc.provider == nil {
				provider.Close()
			}
			cfg := settleConfig(provider.URL)
			if tc.large {
				cfg.Providers[0].StallTimeout.Duration, cfg.Providers[0].CallTimeout.Duration = time.Minute, time.Minute
			}
			g := newSettleGatewayFrom(t, cfg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.leaves {
				go func() { <-received; cancel() }()
			}
			call := g.call
			if tc.job {
				call = g.jobDeliveredTwice
			}
			status, body := call(ctx, tc.stream)
			if !tc.leaves && status != tc.status {
				t.Errorf("status %d; want %d (%.200s)", status, tc.status, body)
			}
			if !strings.Contains(body, tc.answer) {
				t.Errorf("answer %.300q; want it to hold %q", body, tc.answer)
			}
			want := g.estimated(t)
			if tc.want != nil {
				want = tc.want(g, body)
			}
			if got := g.charged(t); got != want {
				t.Errorf("charged %+v; want %+v", got, want)
			}
		})
	}
}

// streamed is what a stream cut after these texts is charged: its estimated prompt and the
// tokens of the text it sent.
func streamed(texts ...string) func(*settleGateway, string) charged {
	return func(g *settleGateway, _ string) charged {
		c, _ := g.newCall(context.Background(), g.policy, g.policy.Caller(settleKey), "chat", []byte(settleBody))
		var completion int64
		for _, text := range texts {
			completion += g.counter.Count("o200k_base", text)
		}
		prompt := c.estimate.PromptTokens
		return charged{requests: 1, tokens: prompt + completion, micros: prompt*1 + completion*2}
	}
}

// TestALongStreamLineIsPassedOnAsItArrives has the provider send the first half of a stream line
// longer than the gateway reads for usage and wait until the client has received some of it: a
// gateway that held the line whole until its end would never pass it on.
func TestALongStreamLineIsPassedOnAsItArrives(t *testing.T) {
	client := &watchingWriter{ResponseRecorder: httptest.NewRecorder(), saw: make(chan struct{})}
	heard := make(chan bool, 1)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		half := streamChunk(longText)[:maxObservedLine+maxObservedLine/2]
		io.WriteString(w, half)
		w.(http.Flusher).Flush()
		select {
		case <-client.saw:
			heard <- true
		case <-time.After(10 * time.Second): // bounds a gateway that holds the line
			heard <- false
		}
		io.WriteString(w, streamChunk(longText)[len(half):])
	}))
	t.Cleanup(provider.Close)
	g := newSettleGateway(t, provider.URL)
	body := strings.Replace(settleBody, `{"model"`, `{"stream":true,"model"`, 1)
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+settleKey)
	g.Handler().ServeHTTP(client, r)
	if !<-heard {
		t.Error("the client received nothing of a long line before the provider sent its end")
	}
	if !strings.Contains(client.Body.String(), streamChunk(longText)) {
		t.Error("the long line did not reach the client whole")
	}
}

// watchingWriter is a client's side of an answer that says when the first completion text of a
// long line arrives.
type watchingWriter struct {
	*httptest.ResponseRecorder
	saw  chan struct{}
	once sync.Once
}

func (w *watchingWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("aaaaaaaa")) {
		w.once.Do(func() { close(w.saw) })
	}
	return w.ResponseRecorder.Write(p)
}
