package ramp

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// recorder passes requests on to the provider and notes, for each chat
// call, when it arrived, the tokens it counts in the provider's minute and
// the status it was answered: the provider's side of a case, which the
// client cannot see when a gateway or a connection pool stands between
// them. It is safe for concurrent use.
type recorder struct {
	next             http.Handler
	defaultMaxTokens int64

	mu   sync.Mutex
	seen []seenCall
}

// seenCall is a call as the recorder saw it.
type seenCall struct {
	at     time.Time
	took   time.Duration // until the provider had answered
	status int
	tokens int64
}

var _ http.Handler = (*recorder)(nil)

// ServeHTTP serves r through the provider, noting chat calls.
func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != openai.Chat.Path() {
		rec.next.ServeHTTP(w, r)
		return
	}
	at := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, openai.MaxBodyBytes))
	if err != nil {
		http.Error(w, "ramp: read the request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &statusWriter{ResponseWriter: w}
	rec.next.ServeHTTP(sw, r)
	rec.note(seenCall{at: at, took: time.Since(at), status: sw.status, tokens: rec.tokens(body)})
}

// tokens is what the provider counts for a call in its minute; 0 for a
// body it cannot read, which it refuses.
func (rec *recorder) tokens(body []byte) int64 {
	req, err := openai.Parse(openai.Chat, body, rec.defaultMaxTokens)
	if err != nil {
		return 0
	}
	return req.Tokens()
}

func (rec *recorder) note(c seenCall) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.seen = append(rec.seen, c)
}

// calls are the calls seen, with times from start.
func (rec *recorder) calls(start time.Time) []call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]call, len(rec.seen))
	for i, c := range rec.seen {
		out[i] = call{at: c.at.Sub(start), took: c.took, status: c.status, tokens: c.tokens}
	}
	return out
}

// statusWriter remembers the status of an answer: 0 until one is written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader remembers the first status and writes it.
func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write writes b, with status 200 if none was written.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush a stream.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
