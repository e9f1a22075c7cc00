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

// chatBody is what Parse reads from a chat request.
type chatBody struct {
	options
	chatOptions
	rendered
	Messages []json.RawMessage `json:"messages"`
}

// chatOptions are the fields of a chat request that completions do not have: its own cap, and
// the service tier it asks for.
type chatOptions struct {
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	ServiceTier         string `json:"service_tier"`
}

// rendered are the fields of a chat request that the provider renders into the prompt its own
// way: they count as their JSON text by the proxy.
type rendered struct {
	Tools          json.RawMessage `json:"tools"`
	Functions      json.RawMessage `json:"functions"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

// chatMessage is what counts in one message.
type chatMessage struct {
	Role         json.RawMessage `json:"role"`
	Name         string          `json:"name"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    json.RawMessage `json:"tool_calls"`
	FunctionCall json.RawMessage `json:"function_call"`
	ToolCallID   string          `json:"tool_call_id"`
}

// contentPart is what counts in one part of an array content.
type contentPart struct {
	Type     string          `json:"type"`
	Text     json.RawMessage `json:"text"`
	Refusal  json.RawMessage `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

// errNoMessages refuses a chat request without messages: there is nothing to answer.
var errNoMessages = &RequestError{Err: ErrInvalidValue, Param: "messages", Want: "an array of at least one message"}

// chatBodyMessages is a chat request read in one pass, its messages decoded with it.
type chatBodyMessages struct {
	options
	chatOptions
	rendered
	Messages []chatMessage `json:"messages"`
}

// parseChat reads a chat request in one pass: by hand when it is plain (see plainChat), else
// with encoding/json. A body that does not decode so is read again, message by message, to say
// which part of it is wrong.
func parseChat(body []byte) (*Request, error) {
	if b, unread, ok := plainChat(body); ok {
		return chatRequest(&b.options, &b.chatOptions, &b.rendered, unread, b.Messages, (*Prompt).addChatMessage)
	}
	var b chatBodyMessages
	if json.Unmarshal(body, &b) != nil {
		return parseChatByMessage(body)
	}
	unread, err := checkKeys(body, &b)
	if err != nil {
		return nil, err
	}
	return chatRequest(&b.options, &b.chatOptions, &b.rendered, unread, b.Messages, (*Prompt).addChatMessage)
}

func parseChatByMessage(body []byte) (*Request, error) {
	var b chatBody
	unread, err := read(body, &b)
	if err != nil {
		return nil, err
	}
	return chatRequest(&b.options, &b.chatOptions, &b.rendered, unread, b.Messages, (*Prompt).addMessage)
}

// chatRequest builds a chat request from its options and its messages, each added to the prompt
// by add with its framing and the images of its model's family, the fields the provider renders
// its own way and the tokens of the keys nothing reads; the reply's priming ends the prompt.
func chatRequest[M any](o *options, co *chatOptions, rd *rendered, unread int64, messages []M, add func(*Prompt, *M, imageFormula) error) (*Request, error) {
	r, err := o.request(Chat, co.MaxCompletionTokens)
	if err != nil {
		return nil, err
	}
	r.ServiceTier = co.ServiceTier
	if len(messages) == 0 {
		return nil, errNoMessages
	}
	images := imageFormulaOf(r.Model)
	for i := range messages {
		if err := add(&r.Prompt, &messages[i], images); err != nil {
			return nil, within("messages", within(index(i), err))
		}
	}
	r.Prompt.addTokens(tokensPerReply)
	r.Prompt.addRendered(rd, unread)
	return r, nil
}

// addRendered adds the fields of a chat request the provider renders its own way, and the
// tokens of the keys nothing reads.
func (p *Prompt) addRendered(rd *rendered, unread int64) {
	p.addJSON(rd.Tools)
	p.addJSON(rd.Functions)
	p.addJSON(rd.ResponseFormat)
	p.addTokens(unread)
}

// addMessage adds one message, still to decode, with its framing and the keys of it that
// nothing reads.
func (p *Prompt) addMessage(raw *json.RawMessage, images imageFormula) error {
	var m chatMessage
	unread, err := read(*raw, &m)
	if err != nil {
		return err
	}
	p.addTokens(unread)
	return p.addChatMessage(&m, images)
}

// addChatMessage adds one decoded message with its framing.
func (p *Prompt) addChatMessage(m *chatMessage, images imageFormula) error {
	p.addTokens(tokensPerMessage)
	if err := within("role", p.addString(m.Role)); err != nil {
		return err
	}
	if m.Name != "" {
		p.addText(m.Name)
		p.addTokens(tokensPerName)
	}
	p.addText(m.ToolCallID)
	p.addJSON(m.ToolCalls)
	p.addJSON(m.FunctionCall)
	return within("content", p.addContent(m.Content, images))
}

// addContent adds a message content: absent, null, a string or an array of
// parts.
func (p *Prompt) addContent(raw json.RawMessage, images imageFormula) error {
	switch firstByte(raw) {
	case 0, 'n':
		return nil
	case '"':
		return p.addString(raw)
	case '[':
		return eachElement(raw, func(part json.RawMessage) error { return p.addPart(part, images) })
	}
	return wrongType("a string or an array")
}

// addPart adds one part of an array content by what it holds, whatever its type says (an engine
// such as vLLM infers a part's type from its keys): its text, its refusal, its image by its
// family's formula, and every other key (a file, audio, a video an engine reads) as its JSON
// text by the proxy, since its formula is not known before the call.
func (p *Prompt) addPart(raw json.RawMessage, images imageFormula) error {
	var part contentPart
	unread, err := read(raw, &part)
	if err != nil {
		return err
	}
	p.addTokens(unread)
	if err := p.addPartTexts(part.Text, part.Refusal); err != nil {
		return err
	}
	if isSet(part.ImageURL) {
		tokens, err := imageTokens(images, part.ImageURL)
		if err != nil {
			return within("image_url", err)
		}
		p.addTokens(tokens)
	}
	return nil
}

// isSet reports whether a JSON value is present and not null.
func isSet(raw json.RawMessage) bool {
	return firstByte(raw) != 0 && firstByte(raw) != 'n'
}

// addJSON adds a JSON value that the provider renders into the prompt its own way (tools, a
// response format's schema, a tool call's arguments): its compact text counted by the proxy,
// which counts JSON a little above the encodings do. null adds nothing.
func (p *Prompt) addJSON(raw json.RawMessage) {
	if !isSet(raw) {
		return
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return
	}
	p.addTokens(proxyBytes(buf.Len()))
}

// index is the path element of the i-th element of an array.
func index(i int) string {
	return "[" + strconv.Itoa(i) + "]"
}
