package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// chunkBytes is the most text one streamed chunk carries: 16 filler tokens.
const chunkBytes = 16 * BytesPerToken

// Pause is called before the i-th of n chunks of text is written, to pace
// a stream; an error stops it.
type Pause func(i, n int) error

// WriteStream answers w with rep as server-sent events in the shape of
// req.Endpoint: for a chat, a first chunk with the role; the text in chunks
// of up to 16 tokens; a chunk with the finish reason; a final usage chunk
// (no choices) when req.IncludeUsage; and "data: [DONE]". Each event is
// flushed as it is written. pause, if not nil, is called before each chunk
// of text; WriteStream stops at its first error, or the first failed write,
// and returns it.
func WriteStream(w http.ResponseWriter, req Request, rep Reply, pause Pause) error {
	StartEvents(w)
	s := stream{w: w, rc: http.NewResponseController(w), e: req.Endpoint, rep: rep}
	if err := s.start(); err != nil {
		return err
	}
	if err := s.text(pause); err != nil {
		return err
	}
	if err := s.finish(req.IncludeUsage); err != nil {
		return err
	}
	return s.event([]byte("[DONE]"))
}

// StartEvents begins an answer of server-sent events on w.
func StartEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// WriteEvent writes ev to w, its type on an event line and its JSON on a
// data line, and flushes it.
func WriteEvent(w http.ResponseWriter, ev Event) error {
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, ev.Data); err != nil {
		return fmt.Errorf("openai: write event: %w", err)
	}
	// A writer that cannot flush still delivers the events, later.
	_ = http.NewResponseController(w).Flush()
	return nil
}

// stream writes the events of one answer.
type stream struct {
	w   io.Writer
	rc  *http.ResponseController
	e   Endpoint
	rep Reply
}

// start sends a chat's role chunk.
func (s *stream) start() error {
	if s.e != Chat {
		return nil
	}
	c := s.rep.completion(s.e, true)
	c.Choices = []choice{{Delta: &message{Role: "assistant", Content: new(string)}}}
	return s.send(c)
}

func (s *stream) text(pause Pause) error {
	pieces := Chunks(s.rep.Text)
	for i, piece := range pieces {
		if pause != nil {
			if err := pause(i, len(pieces)); err != nil {
				return err
			}
		}
		if err := s.choice(&piece, nil); err != nil {
			return err
		}
	}
	return nil
}

// finish sends the finish reason and, if asked, the usage.
func (s *stream) finish(includeUsage bool) error {
	if err := s.choice(nil, &s.rep.FinishReason); err != nil {
		return err
	}
	if !includeUsage {
		return nil
	}
	c := s.rep.completion(s.e, true)
	c.Choices, c.Usage = []choice{}, &s.rep.Usage
	return s.send(c)
}

func (s *stream) choice(text, finish *string) error {
	c := s.rep.completion(s.e, true)
	c.Choices = []choice{makeChoice(s.e, true, text, finish)}
	return s.send(c)
}

func (s *stream) send(c completion) error {
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("openai: encode chunk: %w", err)
	}
	return s.event(data)
}

func (s *stream) event(data []byte) error {
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", data); err != nil {
		return fmt.Errorf("openai: write event: %w", err)
	}
	// A writer that cannot flush still delivers the events, later.
	_ = s.rc.Flush()
	return nil
}

// Chunks cuts text into the pieces a stream sends, of at most chunkBytes
// (16 tokens), on rune boundaries. There is always at least one piece, so a
// stream always has a text chunk.
func Chunks(text string) []string {
	var pieces []string
	for len(text) > chunkBytes {
		cut := chunkBytes
		for cut > 1 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		pieces, text = append(pieces, text[:cut]), text[cut:]
	}
	return append(pieces, text)
}
