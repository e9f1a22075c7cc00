package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"hash"
	"hash/fnv"
	"image"
	_ "image/gif" // images whose size ImageTokens reads
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"
	"time"

	_ "golang.org/x/image/webp"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// The TTLs a cache_control may ask for.
const (
	TTL5m = 5 * time.Minute
	TTL1h = time.Hour
)

// MaxBreakpoints is the most blocks of one request that may carry a
// cache_control.
const MaxBreakpoints = 4

// Prompt is a request's prompt as the cache reads it: its blocks in order,
// the tools, then the system, then the content of each message.
type Prompt struct {
	// Tokens counts the whole prompt.
	Tokens int64
	// Blocks are where each block ends.
	Blocks []Boundary
}

// Boundary is the end of one block of a prompt.
type Boundary struct {
	// Tokens counts the prompt up to the end of the block.
	Tokens int64
	// Sum identifies the prompt up to the end of the block: two prompts
	// with the same content up to there have the same Sum.
	Sum uint64
	// TTL is how long the block's cache_control keeps the prompt up to it,
	// TTL5m or TTL1h; zero for a block that is not a breakpoint.
	TTL time.Duration
}

// Breakpoints counts the blocks that are breakpoints.
func (p Prompt) Breakpoints() int {
	n := 0
	for _, b := range p.Blocks {
		if b.TTL > 0 {
			n++
		}
	}
	return n
}

// The fixed tokens of what the proxy cannot count as text.
const (
	// ImageTokens is an image whose size is not known (a URL, a file, or
	// data that is not a GIF, JPEG, PNG or WebP): the most an image costs
	// once Anthropic has scaled it down.
	ImageTokens = 1600
	// maxImageEdge is the longest edge Anthropic keeps before it scales an
	// image down.
	maxImageEdge = 1568
	// pixelsPerToken is Anthropic's rule for an image: width × height / 750.
	pixelsPerToken = 750
)

// promptWriter adds up a prompt block by block: the text the proxy counts,
// the fixed tokens of images and documents, and the hash of it all. Its
// zero value is not ready: create it with newPromptWriter.
type promptWriter struct {
	textBytes      int
	fixed          int64
	sum            hash.Hash64
	blocks         []Boundary
	documentTokens int64
}

func newPromptWriter(documentTokens int64) *promptWriter {
	return &promptWriter{sum: fnv.New64a(), documentTokens: documentTokens}
}

// text adds s, counted and hashed.
func (w *promptWriter) text(s string) {
	w.textBytes += len(s)
	w.mark(s)
}

// mark hashes s without counting it: what tells blocks apart.
func (w *promptWriter) mark(s string) {
	_, _ = w.sum.Write([]byte(s)) // a hash never fails
	_, _ = w.sum.Write([]byte{0})
}

// tokens adds n fixed tokens of content identified by id.
func (w *promptWriter) tokens(n int64, id string) {
	w.fixed += n
	w.mark(id)
}

// tokensSoFar counts the prompt written so far.
func (w *promptWriter) tokensSoFar() int64 { return openai.TokensOfBytes(w.textBytes) + w.fixed }

// end ends a block, a breakpoint if cc says so.
func (w *promptWriter) end(cc *cacheControl) error {
	ttl, err := cc.ttl()
	if err != nil {
		return err
	}
	w.blocks = append(w.blocks, Boundary{Tokens: w.tokensSoFar(), Sum: w.sum.Sum64(), TTL: ttl})
	return nil
}

// prompt is what was written.
func (w *promptWriter) prompt() Prompt { return Prompt{Tokens: w.tokensSoFar(), Blocks: w.blocks} }

// cacheControl is a block's cache_control.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// ttl is how long cc keeps its prefix; zero for nil.
func (cc *cacheControl) ttl() (time.Duration, error) {
	switch {
	case cc == nil:
		return 0, nil
	case cc.Type != "ephemeral":
		return 0, InvalidRequest("cache_control.type: Input should be 'ephemeral'")
	case cc.TTL == "", cc.TTL == "5m":
		return TTL5m, nil
	case cc.TTL == "1h":
		return TTL1h, nil
	}
	return 0, InvalidRequest("cache_control.ttl: Input should be '5m' or '1h'")
}

// block is the union of the fields read from a content block, a system
// block or a tool.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	Content      json.RawMessage `json:"content"`
	Thinking     string          `json:"thinking"`
	Data         string          `json:"data"`
	Source       *source         `json:"source"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control"`
}

// source is the source of an image or a document.
type source struct {
	Type      string          `json:"type"`
	MediaType string          `json:"media_type"`
	Data      string          `json:"data"`
	URL       string          `json:"url"`
	FileID    string          `json:"file_id"`
	Content   json.RawMessage `json:"content"`
}

// tool adds a tool definition as one block: its JSON, without its
// cache_control.
func (w *promptWriter) tool(raw json.RawMessage) error {
	var b block
	if err := json.Unmarshal(raw, &b); err != nil || b.Name == "" {
		return InvalidRequest("tools: each tool must be an object with a name")
	}
	w.mark("tool")
	w.text(canonical(raw))
	return w.end(b.CacheControl)
}

// system adds the system prompt: a string, one block, or text blocks.
func (w *promptWriter) system(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	w.mark("system")
	return w.content(raw, InvalidRequest("system: Input should be a valid string or list of text blocks"))
}

// message adds a message's content.
func (w *promptWriter) message(role string, content json.RawMessage) error {
	w.mark(role)
	return w.content(content, InvalidRequest("messages: content must be a string or a list of content blocks"))
}

// content adds content that is a string, a text block of its own, or an
// array of blocks; bad is the error for anything else.
func (w *promptWriter) content(raw json.RawMessage, bad *Error) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		w.body(block{Type: "text", Text: s}, nil)
		return w.end(nil)
	}
	var raws []json.RawMessage
	if json.Unmarshal(raw, &raws) != nil {
		return bad
	}
	for _, raw := range raws {
		if err := w.block(raw); err != nil {
			return err
		}
	}
	return nil
}

// block adds one content block.
func (w *promptWriter) block(raw json.RawMessage) error {
	var b block
	if err := json.Unmarshal(raw, &b); err != nil || b.Type == "" {
		return InvalidRequest("content blocks must be objects with a type")
	}
	w.body(b, raw)
	return w.end(b.CacheControl)
}

// body adds what a block holds, as text or fixed tokens:
//
//   - text: its text; thinking: its thinking; redacted_thinking: its data;
//   - image: its tokens (see imageTokens);
//   - document: the text of a text or content source, else documentTokens;
//   - tool_use and server_tool_use: the name and the input as JSON;
//   - tool_result: what its content holds;
//   - any other block: its JSON, without its cache_control.
func (w *promptWriter) body(b block, raw json.RawMessage) {
	w.mark(b.Type)
	switch b.Type {
	case "text":
		w.text(b.Text)
	case "thinking":
		w.text(b.Thinking)
	case "redacted_thinking":
		w.text(b.Data)
	case "image":
		w.tokens(imageTokens(b.Source), sourceID(b.Source))
	case "document":
		w.document(b.Source)
	case "tool_use", "server_tool_use":
		w.text(b.Name)
		w.text(canonical(b.Input))
	case "tool_result":
		w.nested(b.Content)
	default:
		w.text(canonical(raw))
	}
}

// nested adds the content of a tool_result or of a document: a string, or
// blocks that are not blocks of the prompt themselves.
func (w *promptWriter) nested(raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		w.text(s)
		return
	}
	var blocks []json.RawMessage
	_ = json.Unmarshal(raw, &blocks) // other content adds nothing
	for _, raw := range blocks {
		var b block
		if json.Unmarshal(raw, &b) == nil {
			w.body(b, raw)
		}
	}
}

// document adds a document's source: the text of a text or content
// source, or documentTokens for a PDF, a URL or a file.
func (w *promptWriter) document(s *source) {
	switch {
	case s == nil:
	case s.Type == "text":
		w.text(s.Data)
	case s.Type == "content":
		w.nested(s.Content)
	default:
		w.tokens(w.documentTokens, sourceID(s))
	}
}

// imageTokens is what an image costs: width × height / 750, rounded up, once
// its longest edge is scaled down to 1,568 pixels, and at most ImageTokens;
// ImageTokens when its size cannot be read from base64 data.
func imageTokens(s *source) int64 {
	if s == nil || s.Type != "base64" {
		return ImageTokens
	}
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(s.Data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return ImageTokens
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if long := max(w, h); long > maxImageEdge {
		w, h = w*maxImageEdge/long, h*maxImageEdge/long
	}
	return min(int64(math.Ceil(w*h/pixelsPerToken)), ImageTokens)
}

// sourceID identifies a source for the hash.
func sourceID(s *source) string {
	if s == nil {
		return ""
	}
	return s.Type + "\x00" + s.Data + s.URL + s.FileID
}

// canonical is raw as compact JSON with its objects' keys sorted and its
// cache_control left out, so that a breakpoint does not change the text
// it ends; raw itself if it is not JSON.
func canonical(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "cache_control")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // decoded JSON encodes again
	return strings.TrimSuffix(buf.String(), "\n")
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
