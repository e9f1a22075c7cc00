package provider

import (
	"context"
	"math/rand/v2"
	"net/http"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// emitter takes a response's events as they are made. Its error stops a
// response that has not been served yet.
type emitter func(openai.Event) error

// discard is the emitter of a response nobody streams.
func discard(openai.Event) error { return nil }

// writeTo is the emitter that writes each event to w.
func writeTo(w http.ResponseWriter) emitter {
	return func(ev openai.Event) error { return openai.WriteEvent(w, ev) }
}

// emitAll emits events in turn, stopping at the first error.
func emitAll(emit emitter, events []openai.Event) error {
	for _, ev := range events {
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// newResponse is the response to req, admitted as adm with the text of its
// prompt, made now and kept if req asks. A background one is queued, and
// runs in a context that Close ends.
func (s *Server) newResponse(req openai.ResponsesRequest, adm admission, prompt prefix) *response {
	r := &response{
		req: req, id: openai.NewID("resp_"), messageID: openai.NewID("msg_"),
		createdAt: s.clock.Now().Unix(), admission: adm, prompt: prompt,
		latency: jitter(s.opts.Latency, s.opts.LatencyStdDev, rand.NormFloat64()),
		status:  openai.StatusInProgress,
	}
	if req.Background {
		r.status, r.done = openai.StatusQueued, make(chan struct{})
		r.run, r.cancel = context.WithCancelCause(s.runs.ctx)
		if req.Stream {
			r.log = newEventLog()
		}
	}
	if req.Store {
		s.responses.put(r)
	}
	return r
}

// generate makes r's text over its latency, a chunk at a time, and emits
// its events. Its call is served when the last chunk is due: generate then
// bills it, ending it as served says, and emits the rest whatever emit
// answers. Before that, it stops at the first error of a pause (ctx ended)
// or of emit, and returns it, leaving the call to its caller to end.
func (s *Server) generate(ctx context.Context, r *response, emit emitter, served ending) error {
	start := r.events.Start(r.object())
	r.setStatus(openai.StatusInProgress)
	if err := emitAll(emit, start); err != nil {
		return err
	}
	pieces := openai.Chunks(answerText(r.admission.bill))
	for i, piece := range pieces {
		if err := s.sleep(ctx, part(r.latency, i, len(pieces))); err != nil {
			return err
		}
		r.addText(piece)
		last := i == len(pieces)-1
		if last {
			s.complete(r, served)
		}
		if err := emit(r.events.Delta(r.object(), piece)); err != nil && !last {
			return err
		}
	}
	_ = emitAll(emit, r.events.Finish(r.object())) // served: a client that left misses the end
	return nil
}

// complete bills r, whose text is whole, and ends its call as e says.
func (s *Server) complete(r *response, e ending) {
	s.endResponse(r.admission, e, r.admission.bill)
	r.end(openai.StatusCompleted, r.admission.bill, s.clock.Now().Unix())
}

// cancelled bills r, a background response cancelled before it completed,
// for its input, its reasoning and the text made so far, and ends its
// call.
func (s *Server) cancelled(r *response) {
	b := r.admission.bill
	b.OutputTokens = b.ReasoningTokens + r.made()
	b = s.opts.price(b, r.admission.tier)
	s.endResponse(r.admission, cancelledBackground, b)
	r.end(openai.StatusCancelled, b, 0)
}

// abandon ends r's call unbilled: its client left before it was served. A
// foreground response the client left is not kept.
func (s *Server) abandon(r *response) {
	s.endResponse(r.admission, unserved, Bill{})
	s.responses.remove(r.id)
}

func (s *Server) endResponse(adm admission, e ending, b Bill) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account.endResponse(adm.seq, adm.tier, e, b)
}
