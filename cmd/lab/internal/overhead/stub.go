package overhead

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

const (
	// model is the model the requests name, and the encoding the gateway
	// counts its prompt tokens with, as a user would configure it.
	model    = "gpt-4o-mini"
	encoding = "o200k_base"
	// maxTokens is each request's max_tokens: the stub's answer is that
	// many tokens long.
	maxTokens = 16
)

// requestBody is every request: a short chat completion.
var requestBody = openai.ChatBody(model, maxTokens, "Say hello in one short sentence.")

// stub is the zero-delay upstream: it answers every chat completion at
// once, in OpenAI's JSON with a usage block.
type stub struct {
	srv *http.Server
	url string
}

// startStub serves the stub on a free loopback port.
func startStub() (*stub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("overhead: listen for the stub: %w", err)
	}
	var seq atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		req, apiErr := openai.Read(r, openai.Chat, maxTokens, []string{model})
		if apiErr != nil {
			apiErr.Write(w)
			return
		}
		openai.WriteReply(w, openai.Chat, openai.NewReply(req, seq.Add(1), time.Now().Unix()))
	})
	s := &stub{srv: &http.Server{Handler: mux, ReadHeaderTimeout: requestTimeout}, url: "http://" + ln.Addr().String()}
	go func() { _ = s.srv.Serve(ln) }() // ErrServerClosed, when close closes it
	return s, nil
}

// close stops the stub and drops its connections.
func (s *stub) close() { s.srv.Close() }
