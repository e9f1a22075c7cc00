package estimate

import (
	"encoding/json"
)

// responsesBody is what Parse reads from a Responses API request: its prompt, and what it asks
// of what the provider keeps (see Kept). The earlier turns a previous response or a conversation
// adds to the input are not in the body: the gateway adds what it knows of them.
type responsesBody struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
	Instructions    json.RawMessage `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	Tools           json.RawMessage `json:"tools"`
	// Text holds the output's format, whose JSON schema the model reads as prompt.
	Text        json.RawMessage `json:"text"`
	ServiceTier string          `json:"service_tier"`

	Store              *bool           `json:"store"`
	Background         *bool           `json:"background"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Prompt             json.RawMessage `json:"prompt"`
}

// Kept is what a Responses request asks of what its provider keeps: whether the provider is to
// keep the response, whether it runs it in the background, and the objects the provider keeps
// that the request names.
type Kept struct {
	// Store is true unless the body says "store": false: the provider keeps the response.
	Store bool
	// Background is "background": true: the provider runs the response on its own, and answers
	// before it has.
	Background bool
	// Refs are the kept objects the body names, in the order it names them.
	Refs []Ref
}

// Ref is a kept object a request names, by its id.
type Ref struct {
	Kind RefKind
	ID   string
}

// RefKind is what kind of kept object a Ref names, and where the body names it.
type RefKind string

// The kinds of kept object.
const (
	// RefResponse is previous_response_id: a stored response the call continues.
	RefResponse RefKind = "previous_response_id"
	// RefConversation is conversation: a conversation the call continues.
	RefConversation RefKind = "conversation"
	// RefPrompt is prompt.id: a prompt stored at the provider.
	RefPrompt RefKind = "prompt"
	// RefItem is an input item the provider reads from a stored response: an item_reference,
	// or a reasoning item without its encrypted content.
	RefItem RefKind = "item"
	// RefFile is a file_id: in an input part, a prompt's variable or a code interpreter's files.
	RefFile RefKind = "file"
	// RefVectorStore is one of a file_search tool's vector_store_ids.
	RefVectorStore RefKind = "vector_store"
	// RefContainer is a code interpreter's container, named by its id.
	RefContainer RefKind = "container"
)

// Continues reports whether the object r names holds earlier turns that the call carries as
// input: a previous response or a conversation.
func (r Ref) Continues() bool { return r.Kind == RefResponse || r.Kind == RefConversation }

// responseItem is what counts in one input item: a message (its role and content), a function
// call (its name and arguments), or a call's output. Any other item counts as its JSON.
type responseItem struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// EncryptedContent is a reasoning item's own content; one without it is read from the
	// stored response that made it.
	EncryptedContent *string         `json:"encrypted_content"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	CallID           string          `json:"call_id"`
	Output           json.RawMessage `json:"output"`
}

// responsePart is what counts in one part of a message's content.
type responsePart struct {
	Type     string          `json:"type"`
	Text     json.RawMessage `json:"text"`
	Refusal  json.RawMessage `json:"refusal"`
	ImageURL string          `json:"image_url"`
	Detail   string          `json:"detail"`
	FileID   string          `json:"file_id"`
}

// storedPrompt is a Responses request's prompt stored at the provider, and the variables that
// fill it: strings, or input parts, which may name files.
type storedPrompt struct {
	ID        string                     `json:"id"`
	Variables map[string]json.RawMessage `json:"variables"`
}

// conversationRef is a conversation named by an object: {"id": …}.
type conversationRef struct {
	ID string `json:"id"`
}

// toolRefs are the kept objects a tool names: a file search's vector stores, a code
// interpreter's container (its id, or {"type": "auto", "file_ids": […]}).
type toolRefs struct {
	Type           string          `json:"type"`
	VectorStoreIDs []string        `json:"vector_store_ids"`
	Container      json.RawMessage `json:"container"`
}

// autoContainer is a code interpreter's container that the provider makes, with its files.
type autoContainer struct {
	FileIDs []string `json:"file_ids"`
}

// responses reads a Responses request's prompt with the image formula of its model's family,
// and the kept objects it names.
type responses struct {
	p      *Prompt
	images imageFormula
	kept   *Kept
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
	r := &Request{Endpoint: Responses, Model: b.Model, Stream: b.Stream, N: 1, ServiceTier: b.ServiceTier}
	if v := b.MaxOutputTokens; v != nil {
		if *v < 1 {
			return nil, &RequestError{Err: ErrInvalidValue, Param: "max_output_tokens", Want: "1 or more"}
		}
		r.MaxTokens, r.MaxTokensParam = *v, MaxOutputTokens
	}
	r.Kept = &Kept{Store: b.Store == nil || *b.Store, Background: b.Background != nil && *b.Background}
	rd := responses{p: &r.Prompt, images: imageFormulaOf(b.Model), kept: r.Kept}
	if err := rd.addKept(&b); err != nil {
		return nil, err
	}
	if err := rd.addInstructions(b.Instructions); err != nil {
		return nil, within("instructions", err)
	}
	if err := rd.addInput(b.Input); err != nil {
		return nil, within("input", err)
	}
	if err := eachIfArray(b.Tools, rd.addToolRefs); err != nil {
		return nil, within("tools", err)
	}
	r.Prompt.addJSON(b.Tools)
	r.Prompt.addJSON(b.Text)
	r.Prompt.addJSON(b.Prompt)
	r.Prompt.addTokens(tokensPerReply)
	r.Prompt.addTokens(unread)
	return r, nil
}

// addKept reads the kept objects the request names at its top level: the response or the
// conversation it continues, and its stored prompt with the files of its variables.
func (rd responses) addKept(b *responsesBody) error {
	if id := b.PreviousResponseID; id != nil && *id != "" {
		rd.ref(RefResponse, *id)
	}
	switch firstByte(b.Conversation) {
	case 0, 'n':
	case '"':
		var id string
		if err := decode(b.Conversation, &id); err != nil {
			return within("conversation", err)
		}
		rd.ref(RefConversation, id)
	default:
		var c conversationRef
		if _, err := read(b.Conversation, &c); err != nil {
			return within("conversation", err)
		}
		rd.ref(RefConversation, c.ID)
	}
	if !isSet(b.Prompt) {
		return nil
	}
	var sp storedPrompt
	if _, err := read(b.Prompt, &sp); err != nil {
		return within("prompt", err)
	}
	rd.ref(RefPrompt, sp.ID)
	for _, v := range sp.Variables {
		if firstByte(v) != '{' {
			continue
		}
		var part responsePart
		if _, err := read(v, &part); err != nil {
			return within("prompt", within("variables", err))
		}
		// A variable's texts are the provider's to count; they are only checked, as a part's are.
		if err := new(Prompt).addPartTexts(part.Text, part.Refusal); err != nil {
			return within("prompt", within("variables", err))
		}
		rd.ref(RefFile, part.FileID)
	}
	return nil
}

// addToolRefs reads the kept objects one tool names.
func (rd responses) addToolRefs(raw json.RawMessage) error {
	if firstByte(raw) != '{' {
		return nil
	}
	var t toolRefs
	if _, err := read(raw, &t); err != nil {
		return err
	}
	for _, id := range t.VectorStoreIDs {
		rd.ref(RefVectorStore, id)
	}
	switch firstByte(t.Container) {
	case '"':
		var id string
		if err := decode(t.Container, &id); err != nil {
			return within("container", err)
		}
		rd.ref(RefContainer, id)
	case '{':
		var c autoContainer
		if _, err := read(t.Container, &c); err != nil {
			return within("container", err)
		}
		for _, id := range c.FileIDs {
			rd.ref(RefFile, id)
		}
	}
	return nil
}

// ref records that the request names the kept object id, unless id is empty.
func (rd responses) ref(kind RefKind, id string) {
	if id != "" {
		rd.kept.Refs = append(rd.kept.Refs, Ref{Kind: kind, ID: id})
	}
}

// eachIfArray calls add with each element of raw when raw is an array; it does nothing for any
// other value, which the fields' own reading answers.
func eachIfArray(raw json.RawMessage, add func(json.RawMessage) error) error {
	if firstByte(raw) != '[' {
		return nil
	}
	return eachElement(raw, add)
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
	if item.Type == "item_reference" || (item.Type == "reasoning" && item.EncryptedContent == nil) {
		rd.ref(RefItem, item.ID)
	}
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
	if err := p.addPartTexts(part.Text, part.Refusal); err != nil {
		return err
	}
	p.addText(part.FileID)
	rd.ref(RefFile, part.FileID)
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

// Response is what a Responses API answer (a response object) says of what its provider keeps:
// its id, its status, the ids of its output items and its usage, when it has one.
type Response struct {
	ID     string
	Status string
	Items  []string
	// Usage is the response's usage, at the service tier it names; nil while it runs in the
	// background.
	Usage *Usage
}

// responseObject is a response object as ParseResponse reads it.
type responseObject struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
	Output []struct {
		ID string `json:"id"`
	} `json:"output"`
	Usage       *Usage          `json:"usage"`
	ServiceTier json.RawMessage `json:"service_tier"`
}

// ParseResponse reads a response object. It reports false for a body that is not one.
func ParseResponse(body []byte) (Response, bool) {
	var o responseObject
	if json.Unmarshal(body, &o) != nil || o.Object != "response" || o.ID == "" {
		return Response{}, false
	}
	r := Response{ID: o.ID, Status: o.Status}
	for _, item := range o.Output {
		if item.ID != "" {
			r.Items = append(r.Items, item.ID)
		}
	}
	if o.Usage != nil {
		o.Usage.ServiceTier = tierOf(o.ServiceTier)
		if u, ok := o.Usage.checked(); ok {
			r.Usage = &u
		}
	}
	return r, true
}

// Final reports whether the response has ended: completed, failed, cancelled or incomplete.
// One queued or in progress runs on at its provider.
func (r Response) Final() bool {
	switch r.Status {
	case "completed", "failed", "cancelled", "incomplete":
		return true
	}
	return false
}
