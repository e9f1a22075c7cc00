package server

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// queuedComment is the SSE comment a stream that waits in the queue is sent: clients and the
// SSE parsers of the SDKs skip it, and proxies with idle timeouts see the connection in use.
var queuedComment = []byte(": queued\n\n")

// errClientGoneWhileQueued ends the wait of a stream whose client did not take its keepalive.
var errClientGoneWhileQueued = errors.New("the client did not take a keepalive while queued")

// keepalive keeps a stream that waits in the queue alive: once it has waited one interval, its
// status (200) and headers go, with an SSE comment, and another comment at each interval after,
// until it is let go or turned away. What follows goes in the stream (see call.streamStarted): a
// provider's answer as it comes, an error as an SSE event. A call that is not a stream waits
// with nothing sent, as any HTTP answer does.
type keepalive struct {
	stop chan struct{}
	done chan struct{}
}

// keepQueuedStreamAlive starts the keepalive of a streamed call c about to wait in the queue,
// and returns it (nil for a call that is not a stream). A client that does not take a comment
// within the write timeout has left: cancel ends its wait.
func (s *Server) keepQueuedStreamAlive(w http.ResponseWriter, c *call, cancel context.CancelCauseFunc) *keepalive {
	if c.request == nil || !c.request.Stream {
		return nil
	}
	cfg := s.policy.Load().Config.Server
	k := &keepalive{stop: make(chan struct{}), done: make(chan struct{})}
	client := newClientWriter(w, cfg.WriteTimeout.Duration, true)
	go k.run(client, c, cfg.StreamKeepalive.Duration, cancel)
	return k
}

// run sends a comment at each interval until stopped.
func (k *keepalive) run(client *clientWriter, c *call, every time.Duration, cancel context.CancelCauseFunc) {
	defer close(k.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
		}
		if !c.streamStarted {
			startStream(client.w.Header())
			client.w.WriteHeader(http.StatusOK)
			c.streamStarted = true
		}
		if !client.write(queuedComment) {
			cancel(errClientGoneWhileQueued)
			return
		}
	}
}

// end stops the keepalive, and returns once it wrote its last: what the call writes next is its
// own. A nil keepalive has nothing to stop.
func (k *keepalive) end() {
	if k == nil {
		return
	}
	close(k.stop)
	<-k.done
}

// startStream sets the headers of an SSE stream.
func startStream(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
}

// writeEvent sends an error to a client whose stream has started, as the event OpenAI's streams
// carry one in, which its SDKs raise as an API error.
func (e *apiError) writeEvent(client *clientWriter) {
	event := append([]byte("data: "), e.body()...)
	client.write(append(event, '\n'))
}
