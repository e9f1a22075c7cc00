package estimate

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// maxSegment bounds, in bytes, the text handed to the encoder at once. The
// encoder's byte-pair merge is quadratic in the length of a piece, so a long
// run without spaces (base64, minified code, a repeated letter) would
// otherwise cost seconds; cutting keeps the cost linear in the text.
const maxSegment = 1024

// Counter counts tokens in text with a named byte-pair encoding. Encodings are
// loaded on first use, once each, from data compiled into the binary.
//
// A Counter is safe for concurrent use. The zero Counter and a nil *Counter
// count everything with the proxy; use [NewCounter] for real encodings.
type Counter struct {
	// encoders is filled by NewCounter and never changed after, so it is
	// read without a lock.
	encoders map[string]*encoder
}

// encoder is one encoding, loaded at most once.
type encoder struct {
	name string
	once sync.Once
	tk   *tiktoken.Tiktoken // nil when the encoding failed to load
}

// NewCounter returns a Counter for the encodings the package knows. It loads
// nothing yet: each encoding is loaded when it is first counted with.
func NewCounter() *Counter {
	names := []string{
		tiktoken.MODEL_CL100K_BASE,
		tiktoken.MODEL_O200K_BASE,
		tiktoken.MODEL_P50K_BASE,
		tiktoken.MODEL_P50K_EDIT,
		tiktoken.MODEL_R50K_BASE,
	}
	c := &Counter{encoders: make(map[string]*encoder, len(names))}
	for _, name := range names {
		c.encoders[name] = &encoder{name: name}
	}
	return c
}

// Count returns the number of tokens in text under encoding. An empty or
// unknown encoding, or one that failed to load, counts with the proxy
// ceil(UTF-8 bytes / 4). Special tokens such as <|endoftext|> count as the
// plain text they are in a request.
func (c *Counter) Count(encoding string, text string) int64 {
	tk := c.tiktoken(encoding)
	if tk == nil {
		return proxyTokens(text)
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, string(utf8.RuneError))
	}
	var n int64
	for text != "" {
		cut := cutPoint(text)
		n += int64(len(tk.EncodeOrdinary(text[:cut])))
		text = text[cut:]
	}
	return n
}

// tiktoken returns the loaded encoding, or nil to use the proxy.
func (c *Counter) tiktoken(encoding string) *tiktoken.Tiktoken {
	if c == nil {
		return nil
	}
	e, ok := c.encoders[encoding]
	if !ok {
		return nil
	}
	e.once.Do(e.load)
	return e.tk
}

// offlineLoader makes the library read encodings from the data compiled in
// rather than download them. The library keeps its loader in a global, so it
// is set once for the process, before the first encoding is loaded.
var offlineLoader sync.Once

// load loads the encoding; on failure tk stays nil and counting falls back to
// the proxy.
func (e *encoder) load() {
	offlineLoader.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	tk, err := tiktoken.GetEncoding(e.name)
	if err == nil {
		e.tk = tk
	}
}

// proxyTokens is the documented proxy: ceil(UTF-8 bytes / 4).
func proxyTokens(text string) int64 {
	return (int64(len(text)) + 3) / 4
}

// cutPoint returns where to end the next segment of text. It prefers the
// last space in the second half of the window that follows a printable ASCII
// byte: no piece of the encodings' split patterns spans such a boundary, so
// the count is the same as for the whole text. Failing that it cuts at a rune
// boundary, which may add a token per cut.
func cutPoint(text string) int {
	if len(text) <= maxSegment {
		return len(text)
	}
	for i := maxSegment; i > maxSegment/2; i-- {
		if text[i] == ' ' && text[i-1] > ' ' && text[i-1] < utf8.RuneSelf {
			return i
		}
	}
	i := maxSegment
	for i > maxSegment-utf8.UTFMax && !utf8.RuneStart(text[i]) {
		i--
	}
	return i
}
