package overhead

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// stub is the zero-delay upstream: it answers every chat completion at
// once, in OpenAI's JSON with a usage block and with the headers OpenAI
// sends (see setProviderHeaders).
type stub struct {
	srv *http.Server
	url string
}

// startStub serves the stub, its chat completions and its embeddings, on a free loopback port, reporting the limits
// of limits in its rate-limit headers.
func startStub(limits providerLimits) (*stub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("overhead: listen for the stub: %w", err)
	}
	var seq atomic.Uint64
	mux := http.NewServeMux()
	for _, e := range []openai.Endpoint{openai.Chat, openai.Embeddings} {
		mux.HandleFunc("POST "+e.Path(), func(w http.ResponseWriter, r *http.Request) {
			req, apiErr := openai.Read(r, e, maxTokens, []string{model, embeddingModel})
			if apiErr != nil {
				apiErr.Write(w)
				return
			}
			n := seq.Add(1)
			setProviderHeaders(w.Header(), limits, n)
			answer(w, req, openai.NewReply(shortAnswer(req), n, time.Now().Unix()))
		})
	}
	s := &stub{srv: &http.Server{Handler: mux, ReadHeaderTimeout: requestTimeout}, url: "http://" + ln.Addr().String()}
	go func() { _ = s.srv.Serve(ln) }() // ErrServerClosed, when close closes it
	return s, nil
}

// shortAnswer is req as the stub answers it: a chat answered as JSON in maxTokens tokens at most,
// finished for "stop" below its cap, as a short classification is, whatever cap it names; the
// gateway names its model's default cap on a call that names none, and the bare proxy does not,
// and both answers are the same. A stream is as long as its cap.
func shortAnswer(req openai.Request) openai.Request {
	if !req.Stream && req.CompletionTokens > maxTokens {
		req.CompletionTokens, req.Capped = maxTokens, false
	}
	return req
}

// answer writes rep to w, as a stream when req asks for one.
func answer(w http.ResponseWriter, req openai.Request, rep openai.Reply) {
	if req.Stream {
		_ = openai.WriteStream(w, req, rep, nil) // a client gone: nothing to answer
		return
	}
	openai.WriteReply(w, req.Endpoint, rep)
}

// setProviderHeaders sets the headers OpenAI sends with an answer, the n-th
// since the stub started: its request id, its processing time and its
// rate limits, whose remaining counts change from one answer to the next as
// a real provider's do. They report the limits the gateway is configured
// with, so that it learns none lower, and never run out.
func setProviderHeaders(h http.Header, limits providerLimits, n uint64) {
	used := int64(n % 1000)
	h.Set("X-Request-Id", "req_"+strconv.FormatUint(n, 10))
	h.Set("Openai-Processing-Ms", "1")
	h.Set("Openai-Version", "2020-10-01")
	h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(limits.requests, 10))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(limits.requests-1-used, 10))
	h.Set("X-Ratelimit-Reset-Requests", strconv.FormatInt(used%60+1, 10)+"ms")
	h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(limits.tokens, 10))
	h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(limits.tokens-requestTokens*(1+used), 10))
	h.Set("X-Ratelimit-Reset-Tokens", "0s")
}

// close stops the stub and drops its connections.
func (s *stub) close() { s.srv.Close() }
