package estimate

import (
	"encoding/json"
)

// responsesBody is what Parse reads from a Responses API request. previous_response_id and
// background pass through unread: the earlier turns a previous response adds to the input are
// the provider's to count, and settle the call.
type responsesBody struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
	Instructions    json.RawMessage `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	Tools           json.RawMessage `json:"tools"`
	// Text holds the output's format, whose JSON schema the model reads as prompt.
	Text json.RawMessage `json:"text"`
}

// responseItem is what counts in one input item: a message (its role and content), a function
// call (its name and arguments), or a call's output. Any other item counts as its JSON.
type responseItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
}

// responsePart is what counts in one part of a message's content.
type responsePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

// responses reads a Responses request's prompt with the image formula of its model's family.
type responses struct {
	p      *Prompt
	images imageFormula
}

// moderationsBody is what Parse reads from a moderations request.
type moderationsBody struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

// defaultModerationModel is the model a moderations request without one is for, as OpenAI's
// API reference names it.
const defaultModerationModel = "omni-moderation-latest"

func parseResponses(body []byte) (*Request, error) {
	var b responsesBody
	unread, err := read(body, &b)
	if err != nil {
		return nil, err
	}
	if b.Model == "" {
		return nil, &RequestError{Err: ErrMissingModel, Param: "model"}
	}
	r := &Request{Endpoint: Responses, Model: b.Model, Stream: b.Stream, N: 1}
	if v := b.MaxOutputTokens; v != nil {
		if *v < 1 {
			return nil, &RequestError{Err: ErrInvalidValue, Param: "max_output_tokens", Want: "1 or more"}
		}
		r.MaxTokens, r.MaxTokensParam = *v, MaxOutputTokens
	}
	rd := responses{p: &r.Prompt, images: imageFormulaOf(b.Model)}
	if err := rd.addInstructions(b.Instructions); err != nil {
		return nil, within("instructions", err)
	}
	if err := rd.addInput(b.Input); err != nil {
		return nil, within("input", err)
	}
	r.Prompt.addJSON(b.Tools)
	r.Prompt.addJSON(b.Text)
	r.Prompt.addTokens(tokensPerReply)
	r.Prompt.addTokens(unread)
	return r, nil
}

// addInstructions adds a Responses request's instructions, a system message: a string, or
// items as in input.
func (rd responses) addInstructions(raw json.RawMessage) error {
	if firstByte(raw) == '"' {
		rd.p.addTokens(tokensPerMessage)
		return rd.p.addString(raw)
	}
	return rd.addInput(raw)
}

// addInput adds a Responses request's input: absent, a string (one user message) or an
// array of items.
func (rd responses) addInput(raw json.RawMessage) error {
	switch firstByte(raw) {
	case 0, 'n':
		return nil
	case '"':
		rd.p.addTokens(tokensPerMessage)
		rd.p.addText("user")
		return rd.p.addString(raw)
	case '[':
		return eachElement(raw, rd.addItem)
	}
	return wrongType("a string or an array")
}

// addItem adds one input item: a message (its role and content), a function call (its name and
// arguments) or a call's output, each with the keys of it the package does not read; any other
// item as its JSON.
func (rd responses) addItem(raw json.RawMessage) error {
	var item responseItem
	unread, err := read(raw, &item)
	if err != nil {
		return err
	}
	p := rd.p
	switch {
	case item.Role != "" && (item.Type == "" || item.Type == "message"):
		p.addTokens(tokensPerMessage)
		p.addText(item.Role)
		if err := rd.addContent(item.Content); err != nil {
			return within("content", err)
		}
	case item.Type == "function_call":
		p.addText(item.CallID)
		p.addText(item.Name)
		p.addText(item.Arguments)
	case item.Type == "function_call_output" && firstByte(item.Output) == '"':
		p.addText(item.CallID)
		if err := p.addString(item.Output); err != nil {
			return within("output", err)
		}
	default:
		p.addJSON(raw)
		return nil
	}
	p.addTokens(unread)
	return nil
}

// addContent adds a message's content: a string or an array of parts.
func (rd responses) addContent(raw json.RawMessage) error {
	switch firstByte(raw) {
	case 0, 'n':
		return nil
	case '"':
		return rd.p.addString(raw)
	case '[':
		return eachElement(raw, rd.addPart)
	}
	return wrongType("a string or an array")
}

// addPart adds one part of a message's content by what it holds, as a chat's part: its text,
// its refusal, its image by its model family's formula (see imageTokens), and every other key
// (a file, audio) as its JSON.
func (rd responses) addPart(raw json.RawMessage) error {
	var part responsePart
	unread, err := read(raw, &part)
	if err != nil {
		return err
	}
	p := rd.p
	p.addTokens(unread)
	p.addText(part.Text)
	p.addText(part.Refusal)
	if part.Type == "input_image" || part.ImageURL != "" {
		w, h := dataURLSize(part.ImageURL)
		p.addTokens(rd.images(w, h, part.Detail == "low"))
	}
	return nil
}

// parseModerations reads a moderations request, which is free: it counts as a request and no
// tokens.
func parseModerations(body []byte) (*Request, error) {
	var b moderationsBody
	if _, err := read(body, &b); err != nil {
		return nil, err
	}
	switch firstByte(b.Input) {
	case '"', '[':
	case 0, 'n':
		return nil, &RequestError{Err: ErrInvalidValue, Param: "input", Want: "a string or an array"}
	default:
		return nil, within("input", wrongType("a string or an array"))
	}
	if b.Model == "" {
		b.Model = defaultModerationModel
	}
	return &Request{Endpoint: Moderations, Model: b.Model, N: 1}, nil
}
