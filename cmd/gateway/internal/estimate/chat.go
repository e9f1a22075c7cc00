package estimate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The fixed costs of a chat request, as OpenAI's cookbook counts them for
// gpt-3.5-turbo, gpt-4 and gpt-4o.
const (
	// tokensPerMessage frames each message: <|start|>{role}\n{content}<|end|>\n.
	tokensPerMessage = 3
	// tokensPerName is added when a message has a name.
	tokensPerName = 1
	// tokensPerReply primes the reply: <|start|>assistant<|message|>.
	tokensPerReply = 3
)

// The fixed cost of an image part, which cannot be sized before the call
// without fetching and decoding the image.
const (
	// ImageTokens is what an image part counts: a 1024×1024 image at high
	// detail, 85 base tokens and 170 for each of its four 512-pixel tiles.
	ImageTokens = 765
	// LowDetailImageTokens is what an image part with detail "low" counts.
	LowDetailImageTokens = 85
)

// chatBody is what Parse reads from a chat request.
type chatBody struct {
	options
	Messages  []json.RawMessage `json:"messages"`
	Tools     json.RawMessage   `json:"tools"`
	Functions json.RawMessage   `json:"functions"`
}

// chatMessage is what counts in one message.
type chatMessage struct {
	Role         string          `json:"role"`
	Name         string          `json:"name"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    json.RawMessage `json:"tool_calls"`
	FunctionCall json.RawMessage `json:"function_call"`
	ToolCallID   string          `json:"tool_call_id"`
}

// contentPart is what counts in one part of an array content.
type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

// errNoMessages refuses a chat request without messages: there is nothing to answer.
var errNoMessages = &RequestError{Err: ErrInvalidValue, Param: "messages", Want: "an array of at least one message"}

// chatBodyMessages is a chat request read in one pass, its messages decoded with it.
type chatBodyMessages struct {
	options
	Messages  []chatMessage   `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Functions json.RawMessage `json:"functions"`
}

// parseChat reads a chat request in one pass. A body that does not decode so is read again,
// message by message, to say which part of it is wrong.
func parseChat(body []byte) (*Request, error) {
	var b chatBodyMessages
	if json.Unmarshal(body, &b) != nil {
		return parseChatByMessage(body)
	}
	return chatRequest(&b.options, b.Messages, (*Prompt).addChatMessage, b.Tools, b.Functions)
}

func parseChatByMessage(body []byte) (*Request, error) {
	var b chatBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	return chatRequest(&b.options, b.Messages, (*Prompt).addMessage, b.Tools, b.Functions)
}

// chatRequest builds a chat request from its options, its messages, each added to the prompt
// by add with its framing, and its tools; the reply's priming ends the prompt.
func chatRequest[M any](o *options, messages []M, add func(*Prompt, *M) error, tools, functions json.RawMessage) (*Request, error) {
	r, err := o.request(Chat)
	if err != nil {
		return nil, err
	}
	if len(messages) == 0 {
		return nil, errNoMessages
	}
	for i := range messages {
		if err := add(&r.Prompt, &messages[i]); err != nil {
			return nil, within("messages", within(index(i), err))
		}
	}
	r.Prompt.addTokens(tokensPerReply)
	r.Prompt.addJSON(tools)
	r.Prompt.addJSON(functions)
	return r, nil
}

// addMessage adds one message, still to decode, with its framing.
func (p *Prompt) addMessage(raw *json.RawMessage) error {
	var m chatMessage
	if err := decode(*raw, &m); err != nil {
		return err
	}
	return p.addChatMessage(&m)
}

// addChatMessage adds one decoded message with its framing.
func (p *Prompt) addChatMessage(m *chatMessage) error {
	p.addTokens(tokensPerMessage)
	p.addText(m.Role)
	if m.Name != "" {
		p.addText(m.Name)
		p.addTokens(tokensPerName)
	}
	p.addText(m.ToolCallID)
	p.addJSON(m.ToolCalls)
	p.addJSON(m.FunctionCall)
	return within("content", p.addContent(m.Content))
}

// addContent adds a message content: absent, null, a string or an array of
// parts.
func (p *Prompt) addContent(raw json.RawMessage) error {
	switch firstByte(raw) {
	case 0, 'n':
		return nil
	case '"':
		return p.addString(raw)
	case '[':
		return eachElement(raw, p.addPart)
	}
	return wrongType("a string or an array")
}

// addPart adds one part of an array content.
func (p *Prompt) addPart(raw json.RawMessage) error {
	var part contentPart
	if err := decode(raw, &part); err != nil {
		return err
	}
	switch part.Type {
	case "text":
		p.addText(part.Text)
	case "refusal":
		p.addText(part.Refusal)
	case "image_url":
		p.addTokens(imageTokens(part.ImageURL))
	}
	return nil
}

// imageTokens is the fixed cost of an image; a detail it cannot read counts
// as high.
func imageTokens(imageURL json.RawMessage) int64 {
	var v struct {
		Detail string `json:"detail"`
	}
	if firstByte(imageURL) == '{' && json.Unmarshal(imageURL, &v) == nil && v.Detail == "low" {
		return LowDetailImageTokens
	}
	return ImageTokens
}

// addJSON adds a JSON value as its compact text; null adds nothing.
func (p *Prompt) addJSON(raw json.RawMessage) {
	if firstByte(raw) == 0 || firstByte(raw) == 'n' {
		return
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return
	}
	p.addText(buf.String())
}

// index is the path element of the i-th element of an array.
func index(i int) string {
	return "[" + strconv.Itoa(i) + "]"
}
