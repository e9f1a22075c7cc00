package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
)

// The bounds on reading a stream. A line that fits in streamBufferSize is passed on whole, so
// that a usage chunk the client did not ask for can be held back; a longer one is passed on as
// it arrives, and read for usage only up to maxObservedLine.
const (
	streamBufferSize = 16 << 10
	maxObservedLine  = 1 << 20
)

// streamBody passes an SSE answer through line by line, as it arrives, watching for the final
// usage chunk. It ends the call as it reads the stream's end, before the client has received the
// last of it: at the stream's [DONE] (or a Responses stream's final event), at its end of file, or
// where the provider broke it off or the gateway cut it for its provider's slowness; those two
// end cleanly for the client with an error event, which the OpenAI SDKs raise as an error.
type streamBody struct {
	s       *Server
	o       *outbound
	src     io.ReadCloser
	lines   *bufio.Reader
	usage   *estimate.StreamUsage
	pending []byte
	err     error  // ends the stream once pending is sent
	long    []byte // the start of a line longer than the buffer, up to maxObservedLine
}

func (s *Server) newStreamBody(src io.ReadCloser, o *outbound) *streamBody {
	return &streamBody{s: s, o: o, src: src, lines: bufio.NewReaderSize(src, streamBufferSize),
		usage: estimate.NewStreamUsage(s.counter, o.route.Model.Encoding, o.estimate.PromptTokens)}
}

// Read passes on the lines the provider has sent: at least one, and then as many more as fit in
// p and have arrived whole, so that the client receives what arrived together in one write, as
// a bare proxy passes it, rather than a write for each line.
func (b *streamBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(b.pending) == 0 {
			if b.err != nil || n > 0 && !b.lineArrived() {
				break
			}
			b.pending, b.err = b.next()
			continue
		}
		copied := copy(p[n:], b.pending)
		b.pending = b.pending[copied:]
		n += copied
	}
	if n == 0 && b.err != nil {
		return 0, b.err
	}
	return n, nil
}

// lineArrived reports whether a whole line has arrived from the provider and waits to be read.
func (b *streamBody) lineArrived() bool {
	arrived, _ := b.lines.Peek(b.lines.Buffered())
	return bytes.IndexByte(arrived, '\n') >= 0
}

// next reads the stream's next line, or the next piece of a long one, and returns what the
// client receives of it and the error that ends the stream after it.
func (b *streamBody) next() ([]byte, error) {
	piece, err := b.lines.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		b.keepLong(piece)
		return piece, nil
	}
	out := piece
	if b.long != nil {
		b.keepLong(piece)
		b.observe(b.long) // too long to be the usage chunk: passed on whatever it holds
		b.long = nil
	} else {
		out = b.observe(piece)
	}
	if err == nil {
		return out, nil
	}
	return b.ending(out, err)
}

// keepLong keeps the start of a long line to read its usage, up to maxObservedLine.
func (b *streamBody) keepLong(piece []byte) {
	if b.long == nil {
		b.long = make([]byte, 0, 2*streamBufferSize)
	}
	b.long = append(b.long, piece[:min(len(piece), maxObservedLine-len(b.long))]...)
}

// ending ends the call at the stream's end, and returns what the client receives of it: its last
// bytes and, when the provider broke the stream off or the gateway cut it, an error event, then a
// clean end. A stream whose client left ends as relay sees it.
func (b *streamBody) ending(last []byte, err error) ([]byte, error) {
	cause := b.o.tooSlow()
	b.noteResponse()
	switch {
	case b.usage.Done():
		b.s.finish(b.o.call, served(b.soFar()))
		return last, io.EOF
	case b.o.runsInBackground() && (cause != nil || b.o.ctx.Err() == nil):
		b.s.finish(b.o.call, following(b.o.call, http.StatusOK, "its stream ended before the response did"))
		return last, io.EOF
	case err == io.EOF:
		b.s.finish(b.o.call, served(b.soFar()))
		return last, io.EOF
	case cause == nil && b.o.ctx.Err() != nil:
		return last, err
	}
	e := &apiError{Type: typeServer, Code: "provider_stream_broken",
		Message: "The provider's stream broke off before its end; the usage received so far was charged."}
	if cause != nil {
		e.Code, e.Message = "provider_timeout", "The provider of this model did not finish its answer in time: "+cause.Error()+"."
	}
	b.s.metrics.providerErrors.WithLabelValues(b.o.provider(), "0").Inc()
	b.s.finish(b.o.call, ending{outcome: outcomeProviderError, status: http.StatusOK, ticket: settleTicket, usage: b.soFar(),
		detail: e.Code + ": " + err.Error()})
	return slices.Concat(last, eventBreak, errorEvent(e, b.o.endpoint, b.o.requestID)), io.EOF
}

// eventBreak ends whatever event a provider's stream broke off in, so that the error event after
// it is read alone.
var eventBreak = []byte("\n\n")

// observe feeds a data line to the usage counter and returns what the client receives of it. The
// stream's [DONE], or a Responses stream's final event, ends the call: what follows bills nothing,
// and a client may stop reading there.
func (b *streamBody) observe(line []byte) []byte {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
	if !ok {
		return line
	}
	if b.o.firstChunk.IsZero() {
		b.o.firstChunk = time.Now()
		b.o.traced.noteAnswer(data)
	}
	b.usage.Observe(data)
	if b.usage.Done() {
		b.noteResponse()
		b.s.finish(b.o.call, served(b.soFar()))
		return line
	}
	if b.o.usageAdded && isUsageChunk(bytes.TrimSpace(data)) {
		return nil // the client did not ask for it
	}
	return line
}

// noteResponse notes what a Responses stream's events said of what its provider keeps: its
// response's id and its output items'.
func (b *streamBody) noteResponse() {
	if id, items := b.usage.Response(); id != "" {
		b.o.response = &estimate.Response{ID: id, Items: items}
	}
}

// soFar is the usage to settle the stream at now: the provider's, once reported, or the
// estimated prompt and the completion counted so far.
func (b *streamBody) soFar() estimate.Usage {
	u, _ := b.usage.Usage()
	return u
}

// Close closes the provider's answer. A call whose stream was not read to its end is ended by
// its reader, which knows why it stopped (see Server.relay and Server.forward).
func (b *streamBody) Close() error { return b.src.Close() }

// isUsageChunk reports whether a stream chunk is the final one that only carries usage.
func isUsageChunk(data []byte) bool {
	var chunk struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	return json.Unmarshal(data, &chunk) == nil && len(chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}
