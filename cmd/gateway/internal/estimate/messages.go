package estimate

import (
	"encoding/base64"
	"encoding/json"
	"image"
	"strings"
)

// Anthropic's Messages API, read as the other endpoints are: once, each key the package reads
// given once and spelt as the API spells it.
//
// A prompt is the system prompt, then each message's content, framed as a chat's messages are,
// then the tools' JSON by the proxy and toolUseTokens for the system prompt Anthropic adds when
// a request has tools. A block counts by what it holds: a text block its text, thinking its
// thinking, redacted_thinking its data by the proxy, tool_use its name and input, tool_result
// and search_result their content, a document its text (a text or content source) or its data
// by the proxy (a PDF); an image by Anthropic's formula (see anthropicImageTokens); a document
// the package cannot read (a URL, a file) documentTokens; every key the package does not read,
// as its JSON text by the proxy.

// The fixed costs of a Messages prompt.
const (
	// toolUseTokens is the system prompt Anthropic adds to a request with tools: 313 to 346
	// tokens by its documentation, by model and tool_choice.
	toolUseTokens = 346
	// anthropicImageTokens is the most one image costs: about 1,600 tokens, for an image of
	// 1.15 megapixels, which Anthropic scales larger ones down to.
	anthropicImageTokens = 1600
	// anthropicPixelsPerToken and anthropicImageEdge are Anthropic's image formula: width ×
	// height / 750 tokens, once the longest edge is scaled down to 1,568 pixels.
	anthropicPixelsPerToken = 750
	anthropicImageEdge      = 1568
	// documentTokens is what a document the package cannot read before the call counts: a
	// PDF by URL or a file, about ten pages of 2,000 tokens.
	documentTokens = 20000
)

// messagesBody is what Parse reads from a Messages or count_tokens request.
type messagesBody struct {
	Model     string            `json:"model"`
	MaxTokens *int64            `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	System    json.RawMessage   `json:"system"`
	Messages  []messagesMessage `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
}

// messagesMessage is one message of a Messages request.
type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messageBlock is what counts in one content block, or one block of the system prompt.
type messageBlock struct {
	Type     string          `json:"type"`
	Text     json.RawMessage `json:"text"`
	Thinking json.RawMessage `json:"thinking"`
	Data     string          `json:"data"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Content  json.RawMessage `json:"content"`
	Source   json.RawMessage `json:"source"`
}

// blockSource is where an image's or a document's content is.
type blockSource struct {
	Type    string          `json:"type"`
	Data    string          `json:"data"`
	Content json.RawMessage `json:"content"`
}

// messagesRule and the others are how the package reads a Messages request beyond its fields
// (see objectRule).
var (
	messagesRule = objectRule{counted: true, free: fieldSet("model", "messages", "system", "tools", "max_tokens", "stream",
		"stop_sequences", "temperature", "top_p", "top_k", "metadata", "service_tier", "tool_choice", "thinking",
		"cache_control"),
		foreign: foreignCaps(MaxTokens)}
	messageBlockRule = objectRule{counted: true, free: fieldSet("type", "id", "tool_use_id", "cache_control", "is_error", "signature")}
)

// errNoMaxTokens refuses a Messages request without max_tokens, as Anthropic does.
var errNoMaxTokens = &RequestError{Err: ErrInvalidValue, Param: MaxTokens, Want: "an integer of 1 or more: Messages requests require it"}

// parseMessages reads a Messages request, whose max_tokens is required.
func parseMessages(body []byte) (*Request, error) {
	var b messagesBody
	r, err := readMessages(body, &b)
	if err != nil {
		return nil, err
	}
	if b.MaxTokens == nil {
		return nil, errNoMaxTokens
	}
	if *b.MaxTokens < 1 {
		return nil, &RequestError{Err: ErrInvalidValue, Param: MaxTokens, Want: "1 or more"}
	}
	r.Endpoint, r.MaxTokens, r.MaxTokensParam, r.Stream = Messages, *b.MaxTokens, MaxTokens, b.Stream
	return r, nil
}

// parseCountTokens reads a count_tokens request, which is free: it counts as a request and no
// tokens, and its body is checked as a Messages body is.
func parseCountTokens(body []byte) (*Request, error) {
	var b messagesBody
	r, err := readMessages(body, &b)
	if err != nil {
		return nil, err
	}
	return &Request{Endpoint: CountTokens, Model: r.Model, N: 1}, nil
}

// readMessages reads what a Messages and a count_tokens body share: the model, the system
// prompt, the messages and the tools.
func readMessages(body []byte, b *messagesBody) (*Request, error) {
	unread, err := read(body, b)
	if err != nil {
		return nil, err
	}
	if b.Model == "" {
		return nil, &RequestError{Err: ErrMissingModel, Param: "model"}
	}
	if len(b.Messages) == 0 {
		return nil, errNoMessages
	}
	r := &Request{Model: b.Model, N: 1}
	if err := r.Prompt.addBlocks(b.System); err != nil {
		return nil, within("system", err)
	}
	for i := range b.Messages {
		r.Prompt.addTokens(tokensPerMessage)
		if err := r.Prompt.addBlocks(b.Messages[i].Content); err != nil {
			return nil, within("messages", within(index(i), within("content", err)))
		}
	}
	r.Prompt.addTokens(tokensPerReply)
	for _, tool := range b.Tools {
		r.Prompt.addJSON(tool)
	}
	if len(b.Tools) > 0 {
		r.Prompt.addTokens(toolUseTokens)
	}
	r.Prompt.addTokens(unread)
	return r, nil
}

// addBlocks adds a content: absent, null, a string (one text block) or an array of blocks.
func (p *Prompt) addBlocks(raw json.RawMessage) error {
	switch firstByte(raw) {
	case 0, 'n':
		return nil
	case '"':
		return p.addString(raw)
	case '[':
		return eachElement(raw, p.addBlock)
	}
	return wrongType("a string or an array")
}

// addBlock adds one content block by what it holds, whatever its type says.
func (p *Prompt) addBlock(raw json.RawMessage) error {
	var b messageBlock
	unread, err := read(raw, &b)
	if err != nil {
		return err
	}
	p.addTokens(unread)
	if err := within("text", p.addString(b.Text)); err != nil {
		return err
	}
	if err := within("thinking", p.addString(b.Thinking)); err != nil {
		return err
	}
	p.addTokens(proxyBytes(len(b.Data)))
	p.addText(b.Name)
	p.addJSON(b.Input)
	if err := p.addBlocks(b.Content); err != nil {
		return within("content", err)
	}
	if isSet(b.Source) {
		return within("source", p.addSource(b.Type, b.Source))
	}
	return nil
}

// addSource adds an image's or a document's source: an image by its formula, a document's text
// or blocks, a PDF's data by the proxy, and what cannot be read before the call (a URL, a file)
// as the most it may be.
func (p *Prompt) addSource(blockType string, raw json.RawMessage) error {
	if firstByte(raw) != '{' {
		p.addJSON(raw) // a search result's source: its URL
		return nil
	}
	var s blockSource
	if _, err := read(raw, &s); err != nil {
		return err
	}
	switch {
	case blockType == "image":
		p.addTokens(imageTokensOf(s))
	case s.Type == "text":
		p.addText(s.Data)
	case s.Type == "content":
		return within("content", p.addBlocks(s.Content))
	case s.Type == "base64":
		p.addTokens(proxyBytes(len(s.Data)))
	default:
		p.addTokens(documentTokens)
	}
	return nil
}

// imageTokensOf is what an image costs by Anthropic's formula: width × height / 750, rounded
// up, once its longest edge is scaled down to 1,568 pixels, and at most anthropicImageTokens,
// which an image whose size is not read from its base64 PNG, JPEG or GIF data costs.
func imageTokensOf(s blockSource) int64 {
	if s.Type != "base64" {
		return anthropicImageTokens
	}
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(s.Data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return anthropicImageTokens
	}
	w, h := int64(cfg.Width), int64(cfg.Height)
	if long := max(w, h); long > anthropicImageEdge {
		w, h = ceilDiv(w*anthropicImageEdge, long), ceilDiv(h*anthropicImageEdge, long)
	}
	return min(ceilDiv(w*h, anthropicPixelsPerToken), anthropicImageTokens)
}
