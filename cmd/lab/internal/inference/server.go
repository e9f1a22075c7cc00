package inference

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// idle is how long Run sleeps when nothing runs; a submission wakes it
// sooner.
const idle = time.Hour

// Server is a simulated self-hosted inference server: an http.Handler that
// batches requests continuously as vLLM does. Create it with New and keep
// Run running while it serves, or no request finishes. It is safe for
// concurrent use.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	wake  chan struct{} // a change to the batch; Run re-plans
	mu    sync.Mutex
	sched *scheduler
	calls map[uint64]chan struct{} // closed when the sequence finishes
	next  uint64                   // the last id given
}

var _ http.Handler = (*Server)(nil)

// New returns a server configured by opts.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		opts:  opts,
		mux:   http.NewServeMux(),
		wake:  make(chan struct{}, 1),
		sched: newScheduler(opts.capacity(), opts.TokenLatency),
		calls: map[uint64]chan struct{}{},
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(newCollector(opts, s.Load)); err != nil {
		return nil, fmt.Errorf("inference: register metrics: %w", err)
	}
	s.routes(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return s, nil
}

func (s *Server) routes(metrics http.Handler) {
	s.mux.HandleFunc("POST "+openai.Chat.Path(), s.complete(openai.Chat))
	s.mux.HandleFunc("POST "+openai.Completions.Path(), s.complete(openai.Completions))
	s.mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		openai.WriteModels(w, string(s.opts.Engine), []string{s.opts.Model})
	})
	s.mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	s.mux.Handle("GET /metrics", metrics)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { openai.InvalidURL(r).Write(w) })
}

// ServeHTTP serves the API under /v1/, /health, and the engine's gauges at
// /metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Load returns what the server is doing now.
func (s *Server) Load() Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finish(s.sched.advance(time.Now()))
	return s.sched.load()
}

// Run runs the batch in real time until ctx is done: it finishes sequences
// when their last token is due. Requests that are waiting when it returns
// stay until their clients leave.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		t.Reset(s.step(time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// step finishes what is due at now and returns how long until the next
// sequence finishes.
func (s *Server) step(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finish(s.sched.advance(now))
	next, ok := s.sched.nextFinish()
	if !ok {
		return idle
	}
	return next.Sub(now)
}

// complete handles a request to e: it queues the sequence, waits for it to
// finish, and answers, or drops it if the client leaves first.
func (s *Server) complete(e openai.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, err := openai.Read(r, e, s.opts.DefaultMaxTokens, []string{s.opts.Model})
		if err != nil {
			err.Write(w)
			return
		}
		id, done := s.submit(req.CompletionTokens)
		select {
		case <-done:
		case <-r.Context().Done():
			s.cancel(id)
			return
		}
		rep := openai.NewReply(req, id, time.Now().Unix())
		if req.Stream {
			// The whole answer is due now; a client that left gets nothing.
			_ = openai.WriteStream(w, req, rep, nil)
			return
		}
		openai.WriteReply(w, e, rep)
	}
}

// submit queues a sequence of tokens and returns its id and a channel
// closed when it finishes.
func (s *Server) submit(tokens int64) (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.poke()
	s.next++
	done := make(chan struct{})
	s.calls[s.next] = done
	s.finish(s.sched.submit(time.Now(), s.next, tokens))
	return s.next, done
}

// cancel drops a sequence whose client left.
func (s *Server) cancel(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.poke()
	s.finish(s.sched.cancel(time.Now(), id))
	delete(s.calls, id)
}

// finish tells the finished sequences' handlers; s.mu must be held.
func (s *Server) finish(ids []uint64) {
	for _, id := range ids {
		if done, ok := s.calls[id]; ok {
			close(done)
			delete(s.calls, id)
		}
	}
}

// poke tells Run that the batch changed, without waiting.
func (s *Server) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
