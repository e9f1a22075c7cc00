package estimate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseResponses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *Request
	}{{
		name: "string input is one user message",
		body: `{"model":"gpt-4.1","input":"Tell me a story.","max_output_tokens":200,"stream":true}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "gpt-4.1", Stream: true, MaxTokens: 200, MaxTokensParam: "max_output_tokens", N: 1,
			Prompt: Prompt{Texts: texts("user", "Tell me a story."), Tokens: tokensPerMessage + tokensPerReply}},
	}, {
		name: "instructions are a system message",
		body: `{"model":"m","instructions":"Be brief.","input":"Hi."}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "m", N: 1,
			Prompt: Prompt{Texts: texts("Be brief.", "user", "Hi."), Tokens: 2*tokensPerMessage + tokensPerReply}},
	}, {
		name: "messages with parts, an image at each detail",
		body: `{"model":"m","input":[
			{"role":"developer","content":"Answer in French."},
			{"type":"message","role":"user","content":[
				{"type":"input_text","text":"What is this?"},
				{"type":"input_image","image_url":"https://example.com/a.png","detail":"low"},
				{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},
			{"role":"assistant","content":[{"type":"output_text","text":"Un chat."},{"type":"refusal","refusal":"Non."}]}]}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "m", N: 1, Prompt: Prompt{
			Texts: texts("developer", "Answer in French.", "user", "What is this?", "assistant", "Un chat.", "Non."),
			// gpt-4o's formula: 85 at low detail; an image whose size cannot be read counts the
			// most, 85 and 8 tiles of 170.
			Tokens: 3*tokensPerMessage + 85 + (85 + 8*170) + tokensPerReply,
		}},
	}, {
		name: "a function call and its output",
		body: `{"model":"m","input":[
			{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			{"type":"function_call_output","call_id":"call_1","output":"{\"temp\":21}"}]}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "m", N: 1, Prompt: Prompt{
			Texts:  texts("call_1", "get_weather", `{"city":"Paris"}`, "call_1", `{"temp":21}`),
			Tokens: tokensPerReply,
		}},
	}, {
		name: "other items, tools and the output's schema count as their JSON",
		body: `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}],
			"tools":[{"type":"function","name":"f"}],"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}},
			"previous_response_id":"resp_1","background":true}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true, Background: true, Refs: []Ref{{RefResponse, "resp_1"}, {RefItem, "msg_1"}}}, Model: "m", N: 1, Prompt: Prompt{
			Tokens: proxyBytes(len(`{"type":"item_reference","id":"msg_1"}`)) + proxyBytes(len(`[{"type":"function","name":"f"}]`)) +
				proxyBytes(len(`{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}}`)) + tokensPerReply,
		}},
	}, {
		name: "a field the package does not know counts as its JSON",
		body: `{"model":"m","input":"Hi.","prediction":{"type":"content","content":"Hello"}}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "m", N: 1, Prompt: Prompt{Texts: texts("user", "Hi."),
			Tokens: tokensPerMessage + tokensPerReply + proxyBytes(len(`prediction{"type":"content","content":"Hello"}`))}},
	}, {
		name: "the keys of an item or a part the package does not read count as their JSON",
		body: `{"model":"m","input":[{"role":"user","id":"msg_1","extra":"abcdefgh","content":[{"type":"input_file","file_data":"AAAA"}]}]}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "m", N: 1, Prompt: Prompt{Texts: texts("user"),
			Tokens: tokensPerMessage + proxyBytes(len(`extra"abcdefgh"`)) + proxyBytes(len(`file_data"AAAA"`)) + tokensPerReply}},
	}, {
		name: "the service tier asked for",
		body: `{"model":"m","input":"Hi.","service_tier":"flex"}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true}, Model: "m", N: 1, ServiceTier: "flex",
			Prompt: Prompt{Texts: texts("user", "Hi."), Tokens: tokensPerMessage + tokensPerReply}},
	}, {
		name: "no input, as with a previous response",
		body: `{"model":"m","previous_response_id":"resp_1"}`,
		want: &Request{Endpoint: Responses, Kept: &Kept{Store: true, Refs: []Ref{{RefResponse, "resp_1"}}}, Model: "m", N: 1, Prompt: Prompt{Tokens: tokensPerReply}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Responses, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(got, sized(tc.want, tc.body)); diff != "" {
				t.Errorf("Parse (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseResponsesFindsEveryKeptObject(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Kept
	}{{
		name: "nothing kept",
		body: `{"model":"m","input":"Hi.","store":false}`,
		want: Kept{},
	}, {
		name: "a conversation by its id",
		body: `{"model":"m","input":"Hi.","conversation":"conv_1"}`,
		want: Kept{Store: true, Refs: []Ref{{RefConversation, "conv_1"}}},
	}, {
		name: "a conversation as an object",
		body: `{"model":"m","input":"Hi.","conversation":{"id":"conv_2"}}`,
		want: Kept{Store: true, Refs: []Ref{{RefConversation, "conv_2"}}},
	}, {
		name: "a stored prompt and the file of a variable",
		body: `{"model":"m","prompt":{"id":"pmpt_1","version":"2","variables":{"city":"Paris","doc":{"type":"input_file","file_id":"file-9"}}}}`,
		want: Kept{Store: true, Refs: []Ref{{RefPrompt, "pmpt_1"}, {RefFile, "file-9"}}},
	}, {
		name: "files in input parts",
		body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"},{"type":"input_image","file_id":"file-2"}]}]}`,
		want: Kept{Store: true, Refs: []Ref{{RefFile, "file-1"}, {RefFile, "file-2"}}},
	}, {
		name: "a reasoning item read from its response, and one that carries its own content",
		body: `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAA"}]}`,
		want: Kept{Store: true, Refs: []Ref{{RefItem, "rs_1"}}},
	}, {
		name: "a file search's vector stores and a code interpreter's container and files",
		body: `{"model":"m","input":"Hi.","background":true,"tools":[{"type":"file_search","vector_store_ids":["vs_1","vs_2"]},
			{"type":"code_interpreter","container":"cntr_1"},{"type":"code_interpreter","container":{"type":"auto","file_ids":["file-3"]}}]}`,
		want: Kept{Store: true, Background: true, Refs: []Ref{{RefVectorStore, "vs_1"}, {RefVectorStore, "vs_2"}, {RefContainer, "cntr_1"}, {RefFile, "file-3"}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Responses, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(*got.Kept, tc.want); diff != "" {
				t.Errorf("Kept (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseResponsesRefusesAKeptObjectNamedTwice(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","previous_response_id":"resp_1","Previous_Response_ID":"resp_2"}`,
		`{"model":"m","conversation":{"id":"conv_1","ID":"conv_2"}}`,
		`{"model":"m","prompt":{"id":"pmpt_1","id":"pmpt_2"}}`,
		`{"model":"m","tools":[{"type":"file_search","vector_store_ids":["vs_1"],"vector_store_ids":["vs_2"]}]}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1","FILE_ID":"file-2"}]}]}`,
		`{"model":"m","input":[{"type":"item_reference","id":"msg_1","Id":"msg_2"}]}`,
	} {
		if _, err := Parse(Responses, []byte(body)); err == nil {
			t.Errorf("Parse(%s) took a key named twice", body)
		}
	}
}

func TestParseModerationsIsFree(t *testing.T) {
	for body, model := range map[string]string{
		`{"input":"I want to hurt them."}`:                                                                            defaultModerationModel,
		`{"model":"omni-moderation-2024-09-26","input":["a","b"]}`:                                                    "omni-moderation-2024-09-26",
		`{"input":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}`: defaultModerationModel,
	} {
		got, err := Parse(Moderations, []byte(body))
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		want := &Request{Endpoint: Moderations, Model: model, N: 1, Size: int64(len(body))}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("Parse(%s) (-got +want):\n%s", body, diff)
		}
		if e := got.Estimate(NewCounter(), "o200k_base", 256); e.Total() != 0 {
			t.Errorf("Parse(%s) is estimated at %+v; want nothing: moderations are free", body, e)
		}
	}
}

func TestResponsesUsage(t *testing.T) {
	body := `{"id":"resp_1","object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"Hi."}]}],
		"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123}}`
	got, ok := ParseUsage([]byte(body))
	if want := (Usage{PromptTokens: 36, CompletionTokens: 87, TotalTokens: 123}); !ok || got != want {
		t.Errorf("ParseUsage = %+v, %v; want %+v, true", got, ok, want)
	}

	s := NewStreamUsage(NewCounter(), "o200k_base", 50)
	for _, event := range []string{
		`{"type":"response.created","response":{"id":"resp_1","status":"in_progress","usage":null}}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" world"}`,
		`{"type":"response.output_text.done","item_id":"msg_1","text":"Hello world"}`,
	} {
		s.Observe([]byte(event))
	}
	if got, reported := s.Usage(); reported || got.PromptTokens != 50 || got.CompletionTokens != 2 {
		t.Errorf("a stream cut before response.completed: %+v, reported %v; want the estimated prompt, 50, and the 2 tokens of its deltas", got, reported)
	}
	s.Observe([]byte(`{"type":"response.completed","response":{"id":"resp_1","status":"completed","service_tier":"flex",` +
		`"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":8},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":14}}}`))
	want := Usage{PromptTokens: 12, CachedPromptTokens: 8, CompletionTokens: 2, ReasoningTokens: 1, TotalTokens: 14, ServiceTier: "flex"}
	if got, reported := s.Usage(); !reported || got != want {
		t.Errorf("after response.completed: %+v, reported %v; want its usage at its tier, %+v", got, reported, want)
	}
}

func TestParseResponseUsage(t *testing.T) {
	r, ok := ParseResponse([]byte(openAIResponsesAnswer))
	if !ok || r.Usage == nil {
		t.Fatalf("ParseResponse = %+v, %v; want a response with its usage", r, ok)
	}
	want := Usage{PromptTokens: 1536, CachedPromptTokens: 1280, CompletionTokens: 1187, ReasoningTokens: 1152, TotalTokens: 2723, ServiceTier: "flex"}
	if *r.Usage != want {
		t.Errorf("ParseResponse's usage = %+v; want %+v", *r.Usage, want)
	}
}
