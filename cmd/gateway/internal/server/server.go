// Package server is the gateway's HTTP side: the OpenAI-compatible API, and Anthropic's Messages
// API (see anthropic.go), that authenticates a tenant's key, reads and estimates the call, asks the admission gate to let it go, forwards it
// with the provider's key and ends its ticket from the provider's answer; the jobs API and its
// workers; OpenAI's Files and Batches APIs, whose batches' lines run as jobs (batches.go); and the admin endpoints (health, readiness, metrics and the usage snapshot). What a
// call takes from the limits and gives back is the admission package's to decide: server turns
// its tickets and refusals into answers and headers.
package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/balance"
	"github.com/sluicehq/sluice/cmd/gateway/internal/batches"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ids"
	"github.com/sluicehq/sluice/cmd/gateway/internal/kept"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// Options configures a Server.
type Options struct {
	// Limiter keeps the limits. Required.
	Limiter admission.Limiter
	// Fallback, when set, takes decisions on each limit's local share whenever Limiter fails
	// (Redis unreachable, failMode: open). Nil refuses with 503 instead (failMode: closed).
	Fallback admission.Limiter
	// Shares, when set, keeps each provider's queue fair across the gateways that share the
	// provider. Nil means this gateway serves its queues alone.
	Shares admission.Shares
	// Jobs keeps the jobs sent to /v1/jobs. Required.
	Jobs Jobs
	// Batches keeps the files and batches of OpenAI's Files and Batches APIs. Nil means
	// batches.NewMemory with its defaults: this gateway's alone.
	Batches BatchStore
	// Kept records whose each object a provider keeps is, and the background responses the
	// gateways follow. Nil means kept.NewMemory(): this gateway's alone.
	Kept kept.Store
	// Ping reports whether the limiter's store is reachable, for /readyz. Nil means always.
	Ping func(context.Context) error
	// Registerer receives the gateway's metrics; Gatherer serves them at /metrics. Nil means a
	// new registry of the server's own.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Logger receives the request log. Nil means slog.Default().
	Logger *slog.Logger
	// Name identifies this gateway in the usage snapshot (the pod name in a cluster).
	Name string
	// Now returns the time. Nil means time.Now.
	Now func() time.Time
	// ConfigSHA256 returns the SHA-256 of the configuration file in force, which the usage
	// snapshot reports. Nil reports none.
	ConfigSHA256 func() string
	// AdminToken, when set, returns the token every admin endpoint but /healthz and /readyz
	// asks callers for (see gatewayv1.ReadAdminToken). It is called at each such request, so
	// that a token file that changes takes effect at once. Nil leaves them open.
	AdminToken func() (string, error)
	// Tracer, when set, traces each call to the API (see trace.go). Nil traces none, at the cost
	// of a nil check.
	Tracer trace.Tracer
	// LimitsLearned, when set, is called whenever the limits learned from a provider's
	// rate-limit headers change, to compile Learned into the providers' limits
	// (policy.CompileLearned) and SetPolicy the result. Nil means they are only reported.
	LimitsLearned func()
}

// Server serves the gateway. It is safe for concurrent use; SetPolicy swaps the configuration
// in force without stopping requests.
type Server struct {
	opts       Options
	log        *slog.Logger
	policy     atomic.Pointer[policy.Policy]
	gate       *admission.Gate
	counter    *estimate.Counter
	metrics    *metrics
	transports sync.Map         // transportKey -> *upstream.Transport
	endpoints  balance.Balancer // the calls in flight at each self-hosted provider's Pods
	requestIDs *ids.Sequence
	inFlight   inFlight  // calls on the API, against server.maxInFlight
	live       liveCalls // live calls in flight to each provider, whose peaks a batch's lines leave
	lostJobs   lostJobs  // the jobs lost with their store that this gateway counted
	guesses    *guesses  // each client address's failed authentications
	follower   *follower
	services   *services          // the batches on providers' batch services that this gateway follows
	stop       context.CancelFunc // stops the follower
	started    time.Time
}

// New returns a server. Call SetPolicy before it serves requests.
func New(opts Options) *Server {
	if opts.Registerer == nil {
		reg := prometheus.NewRegistry()
		opts.Registerer, opts.Gatherer = reg, reg
	}
	s := &Server{opts: opts, log: opts.Logger, counter: estimate.NewCounter(), requestIDs: ids.New("req_"),
		guesses: newGuesses(), started: time.Now()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.opts.Kept == nil {
		s.opts.Kept = kept.NewMemory()
	}
	if s.opts.Batches == nil {
		s.opts.Batches = batches.NewMemory(batches.Options{})
	}
	s.metrics = newMetrics(opts.Registerer, func() float64 { return float64(s.inFlight.n.Load()) })
	s.gate = admission.New(admission.Options{
		Limiter: opts.Limiter, Fallback: opts.Fallback, Shares: opts.Shares, Jobs: opts.Jobs, Policy: s.policy.Load,
		Registerer: opts.Registerer, Logger: s.log, Now: opts.Now,
	})
	var ctx context.Context
	ctx, s.stop = context.WithCancel(context.Background())
	s.follower = newFollower(s, opts.Name+"/"+s.requestIDs.Next())
	go s.follower.loop(ctx)
	s.services = &services{s: s, holder: opts.Name + "/" + s.requestIDs.Next()}
	go s.services.loop(ctx)
	return s
}

// Close stops the queues' dispatchers and the follower of background responses. Calls still
// waiting are not dispatched; the responses this gateway followed are claimed by another once
// its holds lapse.
func (s *Server) Close() {
	s.stop()
	s.gate.Close()
}

// SetPolicy puts a compiled configuration in force. Calls in progress finish under the one they
// started with.
func (s *Server) SetPolicy(p *policy.Policy) {
	s.policy.Store(p)
	s.metrics.maxInFlight.Reset()
	for _, pr := range p.Providers() {
		if enc := modelEncoding(pr); enc != "" {
			s.counter.Count(enc, "") // load the encoding now, not on a caller's request
		}
		if n := pr.Config.WithHeadroom(pr.Config.MaxInFlight); n > 0 {
			s.metrics.maxInFlight.WithLabelValues(pr.Name).Set(float64(n))
		}
	}
}

func modelEncoding(p *policy.Provider) string {
	for _, m := range p.Config.Models {
		if m.Encoding != "" {
			return m.Encoding
		}
	}
	return ""
}

// Handler returns the OpenAI-compatible API, and Anthropic's Messages API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.serveCall(estimate.Chat))
	mux.HandleFunc("POST /v1/completions", s.serveCall(estimate.Completions))
	mux.HandleFunc("POST /v1/embeddings", s.serveCall(estimate.Embeddings))
	mux.HandleFunc("POST /v1/responses", s.serveCall(estimate.Responses))
	mux.HandleFunc("GET /v1/responses/{id}", s.serveKeptObject(keptResponse))
	mux.HandleFunc("DELETE /v1/responses/{id}", s.serveKeptObject(keptResponse))
	mux.HandleFunc("POST /v1/responses/{id}/cancel", s.serveKeptObject(keptResponse))
	mux.HandleFunc("GET /v1/responses/{id}/input_items", s.serveKeptObject(keptResponse))
	mux.HandleFunc("POST /v1/conversations", s.serveNewConversation)
	mux.HandleFunc("GET /v1/conversations/{id}", s.serveKeptObject(keptConversation))
	mux.HandleFunc("POST /v1/conversations/{id}", s.serveKeptObject(keptConversation))
	mux.HandleFunc("DELETE /v1/conversations/{id}", s.serveKeptObject(keptConversation))
	mux.HandleFunc("GET /v1/conversations/{id}/items", s.serveKeptObject(keptConversation))
	mux.HandleFunc("POST /v1/conversations/{id}/items", s.serveKeptObject(keptConversation))
	mux.HandleFunc("GET /v1/conversations/{id}/items/{item}", s.serveKeptObject(keptConversation))
	mux.HandleFunc("DELETE /v1/conversations/{id}/items/{item}", s.serveKeptObject(keptConversation))
	mux.HandleFunc("POST /v1/moderations", s.serveCall(estimate.Moderations))
	mux.HandleFunc("POST "+messagesPath, s.serveCall(estimate.Messages))
	mux.HandleFunc("POST "+messagesPath+"/count_tokens", s.serveCall(estimate.CountTokens))
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.serveModel)
	mux.HandleFunc("POST /v1/jobs", s.serveAddJob)
	mux.HandleFunc("GET /v1/jobs", s.serveListJobs)
	mux.HandleFunc("GET /v1/jobs/{id}", s.serveGetJob)
	mux.HandleFunc("DELETE /v1/jobs/{id}", s.serveCancelJob)
	mux.HandleFunc("POST /v1/files", s.serveUploadFile)
	mux.HandleFunc("GET /v1/files", s.serveFiles)
	mux.HandleFunc("GET /v1/files/{id}", s.serveFile)
	mux.HandleFunc("GET /v1/files/{id}/content", s.serveFileContent)
	mux.HandleFunc("DELETE /v1/files/{id}", s.serveDeleteFile)
	mux.HandleFunc("POST /v1/batches", s.serveCreateBatch)
	mux.HandleFunc("GET /v1/batches", s.serveBatches)
	mux.HandleFunc("GET /v1/batches/{id}", s.serveBatch)
	mux.HandleFunc("POST /v1/batches/{id}/cancel", s.serveCancelBatch)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		(&apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "unknown_url",
			Message: "Unknown request URL: " + r.Method + " " + r.URL.Path + "."}).write(w)
	})
	return s.withRequestID(withDialect(s.limitInFlight(mux)))
}

// withRequestID gives every answer an x-request-id, as providers do, which the OpenAI SDKs show
// with their errors. A proxied answer keeps its provider's own, when it has one (see
// settleResponse).
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()[headerRequestID] = []string{s.requestIDs.Next()}
		next.ServeHTTP(w, r)
	})
}

// AdminHandler returns the endpoints for operators and Kubernetes: /healthz, /readyz, /metrics,
// /admin/usage, /admin/queues and /admin/record. Serve it on its own port, open only to the
// manager, the metrics adapter and Prometheus: the snapshots and the metrics name every tenant,
// the usage snapshot reads every tenant's budget from the store, and a POST to /admin/record
// moves the store's record versions on. With Options.AdminToken, all but the kubelet's probes
// ask for the token too.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.Handle("GET /metrics", s.adminOnly(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})))
	mux.Handle("GET /admin/usage", s.adminOnly(http.HandlerFunc(s.serveUsage)))
	mux.Handle("GET /admin/queues", s.adminOnly(http.HandlerFunc(s.serveQueues)))
	mux.Handle("POST "+gatewayv1.RecordPath, s.adminOnly(http.HandlerFunc(s.serveRecord)))
	return mux
}

// serveReady is ready once a configuration is in force and, unless the store fails open, while
// the store answers.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	if s.policy.Load() == nil {
		http.Error(w, "no configuration in force", http.StatusServiceUnavailable)
		return
	}
	if s.opts.Ping != nil && s.opts.Fallback == nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ping(ctx); err != nil {
			http.Error(w, "limiter store unreachable", http.StatusServiceUnavailable)
			return
		}
	}
	w.Write([]byte("ok\n"))
}

// model is a model as OpenAI's API lists it. Sluice does not know when a provider made a model:
// created is when this gateway started.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// modelOf is a model as /v1/models lists it, owned by the first provider of its pool that
// routes, the caller's plan's, include.
func (s *Server) modelOf(id string, routes []*policy.Route) model {
	return model{ID: id, Object: "model", Created: s.started.Unix(), OwnedBy: routes[0].Provider.Name}
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	p := s.policy.Load()
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range p.Models(caller.Tenant) {
		routes, _ := routesOf(p, caller, name) // a model of the caller's plan
		list.Data = append(list.Data, s.modelOf(name, routes))
	}
	writeJSON(w, http.StatusOK, list)
}

// serveModel serves one model the caller's plan may call, by its name, an alias or a dated
// snapshot.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request) {
	p := s.policy.Load()
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	id := r.PathValue("id")
	routes, apiErr := routesOf(p, caller, id)
	if apiErr != nil {
		(&apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found", Param: ptr("model"),
			Message: fmt.Sprintf("The model %q does not exist or you do not have access to it.", id)}).write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.modelOf(id, routes))
}

// serveUsage serves the usage snapshot, for the manager's status.
func (s *Server) serveUsage(w http.ResponseWriter, r *http.Request) {
	if s.policy.Load() == nil {
		http.Error(w, "no configuration in force", http.StatusServiceUnavailable)
		return
	}
	u := s.gate.Usage(r.Context())
	s.countBatches(r.Context(), &u)
	u.Gateway = s.opts.Name
	if s.opts.ConfigSHA256 != nil {
		u.ConfigSHA256 = s.opts.ConfigSHA256()
	}
	writeJSON(w, http.StatusOK, u)
}

// serveRecord answers a RecordRequest with every scope's calendar windows as the store holds them
// (see admission.Gate.Record).
func (s *Server) serveRecord(w http.ResponseWriter, r *http.Request) {
	if s.policy.Load() == nil {
		http.Error(w, "no configuration in force", http.StatusServiceUnavailable)
		return
	}
	var req gatewayv1.RecordRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRecordRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "the body must be a record request, {\"versions\": {scope: version}}: "+err.Error(), http.StatusBadRequest)
		return
	}
	rec, err := s.gate.Record(r.Context(), req.Versions)
	if err != nil {
		s.log.Error("read the store for the record", "err", err)
		http.Error(w, "the limiter's store could not be read", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// maxRecordRequestBytes bounds a record request: a version for each of some 100,000 scopes.
const maxRecordRequestBytes = 8 << 20

// serveQueues serves what waits in the queues, for the metrics adapter: it costs no store read.
func (s *Server) serveQueues(w http.ResponseWriter, r *http.Request) {
	if s.policy.Load() == nil {
		http.Error(w, "no configuration in force", http.StatusServiceUnavailable)
		return
	}
	q := s.gate.Queues()
	q.Gateway = s.opts.Name
	writeJSON(w, http.StatusOK, q)
}
