package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseResponses(t *testing.T) {
	const reasoning = `{"type":"reasoning","id":"rs_1","summary":[]}`
	const tools = `{"type":"web_search_preview"}{"type":"file_search","vector_store_ids":["vs_1"]}{"type":"function","name":"f"}`
	tests := []struct {
		name string
		body string
		want ResponsesRequest // without Items and Echo
	}{{
		name: "a string input, the default output, stored",
		body: `{"model":"m","input":"Summarise this page."}`, // 20 bytes
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: 5, Text: "Summarise this page.", OutputTokens: 200, ServiceTier: "default"},
	}, {
		name: "instructions count with the input, before it",
		body: `{"model":"m","instructions":"Be brief.","input":"Summarise this page.","max_output_tokens":40}`, // 9 + 20 bytes
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: 8, Text: "Be brief.Summarise this page.", OutputTokens: 40, ServiceTier: "default"},
	}, {
		name: "text parts count; files named by id or url are counted apart; inline files and images are not",
		body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Summarise this page."},` +
			`{"type":"input_file","file_id":"file-1"},{"type":"input_file","file_url":"https://x/y.pdf"},` +
			`{"type":"input_file","file_data":"JVBERi0="},{"type":"input_image","image_url":"https://x/y.png"}]}]}`,
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: 5, Text: "Summarise this page.", Files: 2, OutputTokens: 200, ServiceTier: "default"},
	}, {
		name: "function calls count their name and arguments, their outputs the output; references nothing",
		body: `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"sunny"},{"type":"item_reference","id":"msg_1"}]}`, // 3 + 5 bytes
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: 2, Text: "f{}sunny", OutputTokens: 200, ServiceTier: "default"},
	}, {
		name: "an item of another shape counts as its JSON",
		body: `{"model":"m","input":[ ` + strings.ReplaceAll(reasoning, ",", ", ") + ` ]}`,
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: TokensOf(reasoning), Text: reasoning, OutputTokens: 200, ServiceTier: "default"},
	}, {
		name: "tools count as their JSON, before the input; searches are counted apart",
		body: `{"model":"m","input":"Summarise this page.","tools":[{"type":"web_search_preview"},{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"function","name":"f"}]}`,
		want: ResponsesRequest{Model: "m", Store: true, OutputTokens: 200, SearchTools: 2, InputTokens: TokensOf(tools + "Summarise this page."),
			Text: tools + "Summarise this page.", ServiceTier: "default"},
	}, {
		name: "background, streamed, continuing a response",
		body: `{"model":"m","input":"hi","background":true,"stream":true,"previous_response_id":"resp_1"}`,
		want: ResponsesRequest{Model: "m", Stream: true, Store: true, Background: true, PreviousResponseID: "resp_1", InputTokens: 1, Text: "hi", OutputTokens: 200, ServiceTier: "default"},
	}, {
		name: "not stored",
		body: `{"model":"m","input":"hi","store":false}`,
		want: ResponsesRequest{Model: "m", InputTokens: 1, Text: "hi", OutputTokens: 200, ServiceTier: "default"},
	}, {
		name: "served at the tier asked",
		body: `{"model":"m","input":"hi","service_tier":"flex"}`,
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: 1, Text: "hi", OutputTokens: 200, ServiceTier: "flex"},
	}, {
		name: "a tier that is neither priority nor flex is served at the default",
		body: `{"model":"m","input":"hi","service_tier":"auto"}`,
		want: ResponsesRequest{Model: "m", Store: true, InputTokens: 1, Text: "hi", OutputTokens: 200, ServiceTier: "default"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResponses([]byte(tc.body), 200)
			if err != nil {
				t.Fatalf("ParseResponses() error = %v", err)
			}
			if diff := cmp.Diff(got, tc.want, cmpopts.IgnoreFields(ResponsesRequest{}, "Items", "Echo")); diff != "" {
				t.Errorf("ParseResponses() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseResponsesItems(t *testing.T) {
	body := `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":"hello"},` +
		`{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`
	req, err := ParseResponses([]byte(body), 200)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, it := range req.Items {
		var fields map[string]any
		if err := json.Unmarshal(it.JSON, &fields); err != nil {
			t.Fatal(err)
		}
		if fields["id"] != it.ID {
			t.Errorf("item %s has id %v in its JSON", it.ID, fields["id"])
		}
		delete(fields, "id")
		got = append(got, fields)
	}
	want := []map[string]any{
		{"type": "message", "role": "user", "status": "completed", "content": []any{map[string]any{"type": "input_text", "text": "hi"}}},
		{"type": "message", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": "hello", "annotations": []any{}}}},
		{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
		{"type": "function_call_output", "call_id": "c1", "output": "sunny"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("items mismatch (-got +want):\n%s", diff)
	}
	ids := []string{req.Items[0].ID[:4], req.Items[1].ID[:4], req.Items[2].ID, req.Items[3].ID[:5]}
	if diff := cmp.Diff(ids, []string{"msg_", "msg_", "fc_1", "item_"}); diff != "" {
		t.Errorf("ids mismatch (-got +want):\n%s", diff)
	}
}

func TestParseResponsesEcho(t *testing.T) {
	req, err := ParseResponses([]byte(`{"model":"m","input":"hi","metadata":{"k":"v"},"temperature":0.2,"max_output_tokens":64}`), 200)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(req.Echo)
	want := `{"instructions":null,"max_output_tokens":64,"max_tool_calls":null,"metadata":{"k":"v"},"parallel_tool_calls":true,` +
		`"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,` +
		`"temperature":0.2,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,` +
		`"top_p":1.0,"truncation":"disabled","user":null}`
	if string(got) != want {
		t.Errorf("Echo = %s; want %s", got, want)
	}
}

func TestParseResponsesErrors(t *testing.T) {
	bad := func(param, code, msg string) *Error {
		return &Error{Status: 400, Type: "invalid_request_error", Param: param, Code: code, Message: msg}
	}
	tests := []struct {
		name string
		body string
		want *Error
	}{
		{"malformed JSON", `{"model":`, bad("", "", "We could not parse the JSON body of your request.")},
		{"no model", `{"input":"hi"}`, bad("model", "", "You must provide a model parameter.")},
		{"an input of the wrong type", `{"model":"m","input":7}`, bad("input", "", "Invalid 'input': must be a string or an array of input items.")},
		{"an item that is not an object", `{"model":"m","input":["hi"]}`, bad("input", "", "Invalid 'input': must be a string or an array of input items.")},
		{"max_output_tokens below 16", `{"model":"m","input":"hi","max_output_tokens":5}`,
			bad("max_output_tokens", "integer_below_min_value", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 5 instead.")},
		{"background without store", `{"model":"m","input":"hi","background":true,"store":false}`, bad("background", "", "Background mode requires store=true.")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResponses([]byte(tc.body), 200)
			if diff := cmp.Diff(err, error(tc.want)); diff != "" {
				t.Errorf("ParseResponses() error mismatch (-got +want):\n%s", diff)
			}
		})
	}
}
