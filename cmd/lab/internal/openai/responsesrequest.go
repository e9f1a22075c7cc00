package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// ResponsesPath is the path of the Responses API.
const ResponsesPath = "/v1/responses"

// minOutputTokens is the least max_output_tokens OpenAI accepts.
const minOutputTokens = 16

// ResponsesRequest is what the simulators need of a request to POST
// /v1/responses.
type ResponsesRequest struct {
	// Model is the model asked for; never empty.
	Model string
	// Stream asks for server-sent events.
	Stream bool
	// Store keeps the response for later reads: true unless the body says
	// false.
	Store bool
	// Background runs the response on its own and answers at once; it
	// implies Store.
	Background bool
	// PreviousResponseID names the response this one continues; empty for
	// none.
	PreviousResponseID string
	// Items are the input's items, each with an id, as input_items lists
	// them.
	Items []InputItem
	// InputTokens is the input the body shows, by the package's proxy: its
	// Text.
	InputTokens int64
	// Text is the input the body shows, in order: its instructions, its
	// tools as JSON, and the text of its items.
	Text string
	// Files counts the input_file parts that name a file by file_id or
	// file_url: files the provider reads, which the body does not show.
	Files int64
	// SearchTools counts the tools that search files or the web
	// (file_search, web_search and web_search_preview): what they find is
	// input the body does not show.
	SearchTools int64
	// OutputTokens is how many tokens the answer has: max_output_tokens,
	// else the server's default.
	OutputTokens int64
	// ServiceTier is the tier that serves the response: TierPriority or
	// TierFlex when its service_tier asks for one, else TierDefault.
	ServiceTier string
	// Echo is what the Response object repeats of the request.
	Echo Echo
}

// Echo is the part of a Responses request that its Response object repeats
// as it was sent, each field as JSON, or OpenAI's default where the request
// has none.
type Echo struct {
	Instructions       json.RawMessage `json:"instructions"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	MaxToolCalls       json.RawMessage `json:"max_tool_calls"`
	Metadata           json.RawMessage `json:"metadata"`
	ParallelToolCalls  json.RawMessage `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	PromptCacheKey     json.RawMessage `json:"prompt_cache_key"`
	Reasoning          json.RawMessage `json:"reasoning"`
	SafetyIdentifier   json.RawMessage `json:"safety_identifier"`
	Temperature        json.RawMessage `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopLogprobs        json.RawMessage `json:"top_logprobs"`
	TopP               json.RawMessage `json:"top_p"`
	Truncation         json.RawMessage `json:"truncation"`
	User               json.RawMessage `json:"user"`
}

// withDefaults is e with OpenAI's default in each field the request left
// out or set to null.
func (e Echo) withDefaults() Echo {
	for _, f := range []struct {
		v   *json.RawMessage
		def string
	}{
		{&e.Instructions, "null"}, {&e.MaxOutputTokens, "null"}, {&e.MaxToolCalls, "null"},
		{&e.Metadata, "{}"}, {&e.ParallelToolCalls, "true"}, {&e.PreviousResponseID, "null"},
		{&e.PromptCacheKey, "null"}, {&e.Reasoning, `{"effort":null,"summary":null}`}, {&e.SafetyIdentifier, "null"},
		{&e.Temperature, "1.0"}, {&e.Text, `{"format":{"type":"text"},"verbosity":"medium"}`}, {&e.ToolChoice, `"auto"`},
		{&e.Tools, "[]"}, {&e.TopLogprobs, "0"}, {&e.TopP, "1.0"}, {&e.Truncation, `"disabled"`}, {&e.User, "null"},
	} {
		if isNull(*f.v) {
			*f.v = json.RawMessage(f.def)
		}
	}
	return e
}

// InputItem is one item of a response's input.
type InputItem struct {
	// ID is the item's id: the one it was sent with, else one made for it.
	ID string
	// JSON is the item as input_items lists it.
	JSON json.RawMessage
}

// MarshalJSON writes the item.
func (it InputItem) MarshalJSON() ([]byte, error) { return it.JSON, nil }

// responsesBody is the part of a Responses request read for its meaning;
// Echo reads the rest.
type responsesBody struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       json.RawMessage   `json:"instructions"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	Background         bool              `json:"background"`
	PreviousResponseID string            `json:"previous_response_id"`
	Tools              []json.RawMessage `json:"tools"`
	ServiceTier        string            `json:"service_tier"`
}

// ReadResponses reads and parses r's body as a request to POST
// /v1/responses (see ParseResponses) and checks that its model is one of
// models. It answers errors ready to write.
func ReadResponses(r *http.Request, defaultMaxTokens int64, models []string) (ResponsesRequest, *Error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		return ResponsesRequest{}, InvalidRequest("", "We could not read the request body.")
	}
	req, err := ParseResponses(data, defaultMaxTokens)
	if err != nil {
		var bad *Error
		if !errors.As(err, &bad) {
			bad = InvalidRequest("", "We could not parse the request.")
		}
		return ResponsesRequest{}, bad
	}
	if !slices.Contains(models, req.Model) {
		return ResponsesRequest{}, UnknownModel(req.Model)
	}
	return req, nil
}

// ParseResponses reads a request body sent to POST /v1/responses. A request
// without max_output_tokens gets defaultMaxTokens. Its errors are [*Error]
// values with status 400 that name the field at fault.
func ParseResponses(data []byte, defaultMaxTokens int64) (ResponsesRequest, error) {
	var b responsesBody
	var echo Echo
	if json.Unmarshal(data, &b) != nil || json.Unmarshal(data, &echo) != nil {
		return ResponsesRequest{}, InvalidRequest("", "We could not parse the JSON body of your request.")
	}
	if err := b.check(); err != nil {
		return ResponsesRequest{}, err
	}
	raws, err := inputItems(b.Input)
	if err != nil {
		return ResponsesRequest{}, err
	}
	req := ResponsesRequest{
		Model: b.Model, Stream: b.Stream, Store: b.Store == nil || *b.Store, Background: b.Background,
		PreviousResponseID: b.PreviousResponseID, OutputTokens: defaultMaxTokens,
		ServiceTier: tier(b.ServiceTier), Echo: echo.withDefaults(),
	}
	if b.MaxOutputTokens != nil {
		req.OutputTokens = *b.MaxOutputTokens
	}
	var text strings.Builder
	text.WriteString(instructionsText(b.Instructions))
	for _, t := range b.Tools {
		text.WriteString(compact(t))
		req.SearchTools += searchTool(t)
	}
	for _, raw := range raws {
		files := writeItem(&text, raw)
		req.Files += files
		req.Items = append(req.Items, withID(raw))
	}
	req.Text = text.String()
	req.InputTokens = TokensOf(req.Text)
	return req, nil
}

// check reports the first field that OpenAI refuses.
func (b responsesBody) check() *Error {
	switch {
	case b.Model == "":
		return InvalidRequest("model", "You must provide a model parameter.")
	case b.MaxOutputTokens != nil && *b.MaxOutputTokens < minOutputTokens:
		e := InvalidRequest("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.", minOutputTokens, *b.MaxOutputTokens)
		e.Code = "integer_below_min_value"
		return e
	case b.Background && b.Store != nil && !*b.Store:
		return InvalidRequest("background", "Background mode requires store=true.")
	}
	return nil
}

// inputItems are the items of an input: a string is one user message, and
// no input none.
func inputItems(raw json.RawMessage) ([]json.RawMessage, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		msg, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": s}) // strings: it cannot fail
		return []json.RawMessage{msg}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || slices.ContainsFunc(items, notObject) {
		return nil, InvalidRequest("input", "Invalid 'input': must be a string or an array of input items.")
	}
	return items, nil
}

func notObject(raw json.RawMessage) bool {
	return !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{"))
}

// item is the part of an input item the proxy reads.
type item struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

func (it item) isMessage() bool { return it.Type == "message" || it.Type == "" && it.Role != "" }

// part is the part of a content part the proxy reads.
type part struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	FileID  string `json:"file_id"`
	FileURL string `json:"file_url"`
}

// writeItem writes the text of an item the proxy counts, and returns the
// files it names: the text of a message; the name and arguments of a
// function call; the output of a function call's output; nothing of a
// reference to an item; and the JSON of an item of another shape, or one
// it cannot read.
func writeItem(text *strings.Builder, raw json.RawMessage) int64 {
	var it item
	if json.Unmarshal(raw, &it) != nil {
		text.WriteString(compact(raw))
		return 0
	}
	switch {
	case it.isMessage():
		if s, files, ok := contentText(it.Content); ok {
			text.WriteString(s)
			return files
		}
	case it.Type == "function_call":
		text.WriteString(it.Name + it.Arguments)
		return 0
	case it.Type == "function_call_output":
		if s, files, ok := contentText(it.Output); ok {
			text.WriteString(s)
			return files
		}
	case it.Type == "item_reference":
		return 0
	}
	text.WriteString(compact(raw))
	return 0
}

// contentText is the text of a content, a string or an array of parts
// whose text counts, and the files its parts name.
func contentText(raw json.RawMessage) (string, int64, bool) {
	if isNull(raw) {
		return "", 0, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 0, true
	}
	var parts []part
	if json.Unmarshal(raw, &parts) != nil {
		return "", 0, false
	}
	var text strings.Builder
	var files int64
	for _, p := range parts {
		text.WriteString(p.Text)
		if p.Type == "input_file" && (p.FileID != "" || p.FileURL != "") {
			files++
		}
	}
	return text.String(), files, true
}

// instructionsText is the text of instructions: a string, or the JSON of
// anything else.
func instructionsText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compact(raw)
}

// searchTool is 1 for a tool that searches files or the web, else 0.
func searchTool(raw json.RawMessage) int64 {
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &t) == nil && (t.Type == "file_search" || strings.HasPrefix(t.Type, "web_search")) {
		return 1
	}
	return 0
}

// withID is the item as input_items lists it: with an id (msg_ for a
// message, item_ for another item that has none), and a message with its
// type, its status and its content as parts.
func withID(raw json.RawMessage) InputItem {
	var it item
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &it) // an item it cannot read keeps its fields as they are
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		fields = map[string]json.RawMessage{}
	}
	prefix := "item_"
	if it.isMessage() {
		prefix = "msg_"
		setDefault(fields, "type", `"message"`)
		setDefault(fields, "status", `"completed"`)
		fields["content"] = contentParts(it.Role, fields["content"])
	}
	id := it.ID
	if id == "" {
		id = NewID(prefix)
		fields["id"], _ = json.Marshal(id) // a string: it cannot fail
	}
	data, _ := json.Marshal(fields) // valid JSON values: it cannot fail
	return InputItem{ID: id, JSON: data}
}

func setDefault(fields map[string]json.RawMessage, key, value string) {
	if isNull(fields[key]) {
		fields[key] = json.RawMessage(value)
	}
}

// contentParts is a message's content as parts: a string becomes one text
// part, input_text for the user's messages and output_text for the
// assistant's.
func contentParts(role string, raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		if isNull(raw) {
			return json.RawMessage("[]")
		}
		return raw
	}
	p := map[string]any{"type": "input_text", "text": s}
	if role == "assistant" {
		p = map[string]any{"type": "output_text", "text": s, "annotations": []any{}}
	}
	data, _ := json.Marshal([]any{p}) // strings and empty arrays: it cannot fail
	return data
}

// compact is raw's JSON without insignificant space.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}
