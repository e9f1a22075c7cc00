package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// responseRoutes serve the Responses API and the responses the provider
// keeps.
func (s *Server) responseRoutes() {
	s.mux.Handle("POST "+openai.ResponsesPath, s.api(s.createResponse))
	s.mux.Handle("GET "+openai.ResponsesPath+"/{id}", s.api(s.getResponse))
	s.mux.Handle("DELETE "+openai.ResponsesPath+"/{id}", s.api(s.deleteResponse))
	s.mux.Handle("POST "+openai.ResponsesPath+"/{id}/cancel", s.api(s.cancelResponse))
	s.mux.Handle("GET "+openai.ResponsesPath+"/{id}/input_items", s.api(s.listInputItems))
}

// createResponse handles POST /v1/responses: it reads the request, admits
// it with its hidden context or answers why not, and answers it as JSON
// after its latency, as events while it is made, or, in the background, at
// once.
func (s *Server) createResponse(w http.ResponseWriter, hr *http.Request) {
	req, err := openai.ReadResponses(hr, s.opts.DefaultMaxTokens, s.opts.Models)
	if err != nil {
		err.Write(w)
		return
	}
	a, err := s.responseAsk(req)
	if err != nil {
		err.Write(w)
		return
	}
	adm, err := s.admit(w, a)
	if err != nil {
		err.Write(w)
		return
	}
	s.respond(w, hr, s.newResponse(req, adm, a.text))
}

// responseAsk plans req as a chat call is planned. Its input is what its
// body shows, the files it names and the searches its tools make, which
// the provider reads, and the whole chain its previous response ends,
// whose text leads its own.
func (s *Server) responseAsk(req openai.ResponsesRequest) (ask, *openai.Error) {
	a := ask{model: req.Model, tier: req.ServiceTier, cap: req.OutputTokens}
	input := req.InputTokens + req.Files*s.opts.FileTokens + req.SearchTools*s.opts.ToolTokens
	if req.PreviousResponseID != "" {
		chain, text, err := s.chain(req.PreviousResponseID)
		if err != nil {
			return ask{}, err
		}
		input, a.text = input+chain, text
	}
	a.text.write(req.Text)
	a.whole = s.opts.completion(req.OutputTokens, s.opts.reasoning(req.Model))
	a.whole.InputTokens = input
	return a, nil
}

// chain is the context the response id ends, in tokens and as text, for a
// response that continues it.
func (s *Server) chain(id string) (int64, prefix, *openai.Error) {
	prev := s.responses.get(id)
	if prev == nil {
		return 0, prefix{}, openai.PreviousResponseNotFound(id)
	}
	tokens, text, ended := prev.chain()
	if !ended {
		return 0, prefix{}, openai.InvalidRequest("previous_response_id", "Previous response with id '%s' is still in progress.", id)
	}
	return tokens, text, nil
}

// respond answers an admitted response: in the background, streamed, or
// as JSON once it is made. A foreground response whose client leaves
// first is not billed.
func (s *Server) respond(w http.ResponseWriter, hr *http.Request, r *response) {
	switch {
	case r.req.Background:
		queued := r.object()
		s.runs.start(func() { s.runBackground(r) })
		if !r.req.Stream {
			openai.WriteJSON(w, http.StatusOK, queued)
			return
		}
		openai.StartEvents(w)
		_ = r.log.follow(hr.Context(), -1, writeTo(w)) // a client that leaves stops following, not the response
	case r.req.Stream:
		openai.StartEvents(w)
		if s.generate(hr.Context(), r, writeTo(w), completedForeground) != nil {
			s.abandon(r)
		}
	default:
		if s.generate(hr.Context(), r, discard, completedForeground) != nil {
			s.abandon(r)
			return
		}
		openai.WriteJSON(w, http.StatusOK, r.object())
	}
}

// getResponse handles GET /v1/responses/{id}: the response as it stands,
// or, with stream=true, the events of a streamed background response after
// starting_after, those kept and then those to come.
func (s *Server) getResponse(w http.ResponseWriter, hr *http.Request) {
	r := s.responses.get(hr.PathValue("id"))
	if r == nil {
		openai.ResponseNotFound(hr.PathValue("id")).Write(w)
		return
	}
	stream, after, err := streamParams(hr)
	switch {
	case err != nil:
		err.Write(w)
	case !stream:
		openai.WriteJSON(w, http.StatusOK, r.object())
	case r.log == nil:
		openai.InvalidRequest("stream", "Response with id '%s' was not created with background=true and stream=true, so it cannot be streamed.", r.id).Write(w)
	default:
		openai.StartEvents(w)
		_ = r.log.follow(hr.Context(), after, writeTo(w))
	}
}

// streamParams reads whether a GET asks for a response's events, in its
// query (stream=true) or, as the Go SDK asks, its JSON body, and after
// which sequence number (-1 for all).
func streamParams(hr *http.Request) (bool, int64, *openai.Error) {
	q := hr.URL.Query()
	stream, _ := strconv.ParseBool(q.Get("stream"))
	var body struct {
		Stream bool `json:"stream"`
	}
	if data, err := io.ReadAll(http.MaxBytesReader(nil, hr.Body, openai.MaxBodyBytes)); err == nil && json.Unmarshal(data, &body) == nil {
		stream = stream || body.Stream
	}
	after := int64(-1)
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return false, 0, openai.InvalidRequest("starting_after", "Invalid 'starting_after': must be an integer of 0 or more.")
		}
		after = n
	}
	return stream, after, nil
}

// cancelResponse handles POST /v1/responses/{id}/cancel: a background
// response still queued or in progress is cancelled, and the response is
// returned once it has ended, whichever way.
func (s *Server) cancelResponse(w http.ResponseWriter, hr *http.Request) {
	r := s.responses.get(hr.PathValue("id"))
	switch {
	case r == nil:
		openai.ResponseNotFound(hr.PathValue("id")).Write(w)
		return
	case !r.req.Background:
		openai.InvalidRequest("", "Only background responses can be cancelled.").Write(w)
		return
	}
	r.cancel(errCancelled) // nothing, if it has ended
	select {
	case <-r.done: // at its next pause, at once
		openai.WriteJSON(w, http.StatusOK, r.object())
	case <-hr.Context().Done():
	}
}

// deleteResponse handles DELETE /v1/responses/{id}. A background response
// still being made goes on, and is billed, but can no longer be read.
func (s *Server) deleteResponse(w http.ResponseWriter, hr *http.Request) {
	id := hr.PathValue("id")
	if !s.responses.remove(id) {
		openai.ResponseNotFound(id).Write(w)
		return
	}
	openai.WriteDeleted(w, id)
}

// listInputItems handles GET /v1/responses/{id}/input_items: a page of the
// response's input items.
func (s *Server) listInputItems(w http.ResponseWriter, hr *http.Request) {
	r := s.responses.get(hr.PathValue("id"))
	if r == nil {
		openai.ResponseNotFound(hr.PathValue("id")).Write(w)
		return
	}
	p, err := readPage(hr.URL.Query())
	if err != nil {
		err.Write(w)
		return
	}
	items, more := p.of(r.req.Items)
	openai.WriteItems(w, items, more)
}

// page is one page of a list: at most limit items, in order, after the
// item with id after (from the start if empty or not in the list).
type page struct {
	limit int
	desc  bool
	after string
}

// readPage reads a page from the query's limit (1 to 100, 20 if unset),
// order ("asc" or "desc", the default) and after.
func readPage(q url.Values) (page, *openai.Error) {
	p := page{limit: 20, desc: true, after: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return page{}, openai.InvalidRequest("limit", "Invalid 'limit': must be an integer from 1 to 100.")
		}
		p.limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		p.desc = false
	default:
		return page{}, openai.InvalidRequest("order", "Invalid 'order': must be 'asc' or 'desc'.")
	}
	return p, nil
}

// of is the page of items, and whether more follow it.
func (p page) of(items []openai.InputItem) ([]openai.InputItem, bool) {
	items = slices.Clone(items)
	if p.desc {
		slices.Reverse(items)
	}
	if i := slices.IndexFunc(items, func(it openai.InputItem) bool { return it.ID == p.after }); i >= 0 {
		items = items[i+1:]
	}
	if len(items) > p.limit {
		return items[:p.limit], true
	}
	return items, false
}
