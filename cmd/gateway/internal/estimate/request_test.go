package estimate

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseChat(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *Request
	}{{
		name: "minimal",
		body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		want: &Request{Endpoint: Chat, Model: "gpt-4o", N: 1, Prompt: Prompt{Texts: texts("user", "hi"), Tokens: 6}},
	}, {
		name: "stream, max_tokens and n",
		body: `{"model":"m","stream":true,"max_tokens":100,"n":2,"messages":[{}]}`,
		want: &Request{Endpoint: Chat, Model: "m", Stream: true, MaxTokens: 100, MaxTokensParam: "max_tokens", N: 2, Prompt: Prompt{Tokens: 3 + 3}},
	}, {
		name: "max_completion_tokens",
		body: `{"model":"m","max_completion_tokens":50,"messages":[{}]}`,
		want: &Request{Endpoint: Chat, Model: "m", MaxTokens: 50, MaxTokensParam: "max_completion_tokens", N: 1, Prompt: Prompt{Tokens: 3 + 3}},
	}, {
		name: "null max_completion_tokens falls back to max_tokens",
		body: `{"model":"m","max_tokens":100,"max_completion_tokens":null,"n":null,"stream":null,"messages":[{}]}`,
		want: &Request{Endpoint: Chat, Model: "m", MaxTokens: 100, MaxTokensParam: "max_tokens", N: 1, Prompt: Prompt{Tokens: 3 + 3}},
	}, {
		name: "name counts one token more",
		body: `{"model":"m","messages":[{"role":"system","name":"example_user","content":"New synergies."}]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{
			Texts: texts("system", "example_user", "New synergies."), Tokens: 3 + 1 + 3,
		}},
	}, {
		name: "content parts",
		body: `{"model":"m","messages":[{"role":"user","content":[
			{"type":"text","text":"What is in these images?"},
			{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},
			{"type":"image_url","image_url":{"url":"https://example.com/b.png","detail":"low"}},
			{"type":"image_url","image_url":{"url":"https://example.com/c.png","detail":"high"}},
			{"type":"image_url","image_url":"https://example.com/d.png"},
			{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},
			{"type":"file","file":{"file_id":"file-1"}}
		]},{"role":"assistant","content":[{"type":"refusal","refusal":"I can't."}]}]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{
			// By URL, an image's size is not known: at high detail it counts the largest,
			// 85 + 8 tiles × 170. Audio and a file count as their JSON: input_audio, 11 + 30
			// bytes; file, 4 + 20.
			Texts:  texts("user", "What is in these images?", "assistant", "I can't."),
			Tokens: 3 + 1445 + 85 + 1445 + 1445 + 11 + 6 + 3 + 3,
		}},
	}, {
		name: "tool calls and tool results",
		body: `{"model":"m","messages":[
			{"role":"assistant","content":null,"tool_calls":[ {"id":"call_1","type":"function",
				"function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}} ]},
			{"role":"tool","tool_call_id":"call_1","content":"18C"},
			{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}
		]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{
			// Tool calls count their compact JSON by the proxy: 105 bytes and 29.
			Texts:  texts("assistant", "tool", "call_1", "18C", "assistant"),
			Tokens: 3*3 + 3 + 27 + 8,
		}},
	}, {
		name: "tools, functions and response format as compact JSON by the proxy",
		body: `{"model":"m","messages":[{}],"tools":[ { "type": "function", "function": { "name": "f" } } ],
			"functions":[{"name":"g"}],"tool_choice":"auto",
			"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}}}`,
		// tools: 45 bytes; functions: 14; tool_choice, unknown: 11 + 6; response_format: 75.
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{Tokens: 3 + 3 + 12 + 4 + 5 + 19}},
	}, {
		name: "space around values",
		body: " { \"model\" : \"m\" , \"messages\" : [ { \"role\" : \"user\" , \"content\" : [ { \"type\" : \"text\" , \"text\" : \"x\" } ] } ] } \n",
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{Texts: texts("user", "x"), Tokens: 6}},
	}, {
		name: "unknown fields count by the proxy, their name included",
		body: `{"model":"m","temperature":"not read","x-vendor":{"a":[1,{"b":null}]},"messages":[{"role":"user","content":"hi","extra":5}]}`,
		// x-vendor: 8 + 20 bytes; a message's extra: 5 + 1 bytes.
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{Texts: texts("user", "hi"), Tokens: 6 + 7 + 2}},
	}, {
		name: "a part counts by what it holds, whatever its type says",
		body: `{"model":"m","messages":[{"role":"user","content":[{"image_url":{"url":"https://example.com/a.png"}},{"type":"image_url","text":"hi"}]}]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{Texts: texts("user", "hi"), Tokens: 3 + 1445 + 3}},
	}, {
		name: "the service tier asked for",
		body: `{"model":"m","service_tier":"priority","messages":[{}]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, ServiceTier: "priority", Prompt: Prompt{Tokens: 3 + 3}},
	}, {
		name: "the service tier asked for, read by encoding/json",
		body: `{"model":"m","service_tier":"flex","stream_options":null,"messages":[{}]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, ServiceTier: "flex", Prompt: Prompt{Tokens: 3 + 3}},
	}, {
		name: "null messages and empty content",
		body: `{"model":"m","messages":[{"role":"user","content":""},{"role":"user"}]}`,
		want: &Request{Endpoint: Chat, Model: "m", N: 1, Prompt: Prompt{Texts: texts("user", "user"), Tokens: 9}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Chat, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(got, sized(tc.want, tc.body)); diff != "" {
				t.Errorf("Parse (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseCompletions(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *Request
	}{{
		name: "string prompt",
		body: `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7,"stream":true}`,
		want: &Request{Endpoint: Completions, Model: "gpt-3.5-turbo-instruct", Stream: true, MaxTokens: 7, MaxTokensParam: "max_tokens", N: 1,
			Prompt: Prompt{Texts: texts("Say this is a test")}},
	}, {
		name: "array of strings is a batch",
		body: `{"model":"m","prompt":["a","b","c"],"n":2}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 6, Prompt: Prompt{Texts: texts("a", "b", "c")}},
	}, {
		name: "token ids count exactly",
		body: `{"model":"m","prompt":[1212, 318, 257, 1332]}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 1, Prompt: Prompt{Tokens: 4}},
	}, {
		name: "array of token arrays is a batch",
		body: `{"model":"m","prompt":[[1,2],[3]]}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 2, Prompt: Prompt{Tokens: 3}},
	}, {
		name: "strings and token arrays in one batch",
		body: `{"model":"m","prompt":["a",[1,2]]}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 2, Prompt: Prompt{Texts: texts("a"), Tokens: 2}},
	}, {
		name: "best_of is billed when larger than n",
		body: `{"model":"m","prompt":"p","n":2,"best_of":5}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 5, Prompt: Prompt{Texts: texts("p")}},
	}, {
		name: "suffix counts as prompt",
		body: `{"model":"m","prompt":"def f(","suffix":"return x"}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 1, Prompt: Prompt{Texts: texts("def f(", "return x")}},
	}, {
		name: "absent prompt",
		body: `{"model":"m"}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 1},
	}, {
		name: "empty array",
		body: `{"model":"m","prompt":[]}`,
		want: &Request{Endpoint: Completions, Model: "m", N: 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Completions, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(got, sized(tc.want, tc.body)); diff != "" {
				t.Errorf("Parse (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseEmbeddings(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *Request
	}{{
		name: "string input",
		body: `{"model":"text-embedding-3-small","input":"The food was delicious","encoding_format":"float"}`,
		want: &Request{Endpoint: Embeddings, Model: "text-embedding-3-small", N: 1,
			Prompt: Prompt{Texts: texts("The food was delicious")}},
	}, {
		name: "array of strings",
		body: `{"model":"m","input":["a","b"]}`,
		want: &Request{Endpoint: Embeddings, Model: "m", N: 1, Prompt: Prompt{Texts: texts("a", "b")}},
	}, {
		name: "token ids",
		body: `{"model":"m","input":[1,2,3]}`,
		want: &Request{Endpoint: Embeddings, Model: "m", N: 1, Prompt: Prompt{Tokens: 3}},
	}, {
		name: "array of token arrays",
		body: `{"model":"m","input":[[1,2],[3,4,5]]}`,
		want: &Request{Endpoint: Embeddings, Model: "m", N: 1, Prompt: Prompt{Tokens: 5}},
	}, {
		name: "completion fields are not read, and count as unknown fields",
		body: `{"model":"m","input":"x","stream":"not read","n":-1}`,
		want: &Request{Endpoint: Embeddings, Model: "m", N: 1, Prompt: Prompt{Texts: texts("x"), Tokens: 4 + 1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Embeddings, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(got, sized(tc.want, tc.body)); diff != "" {
				t.Errorf("Parse (-got +want):\n%s", diff)
			}
		})
	}
}

// secret is in bodies that are refused, to check that errors do not echo them.
const secret = "hunter2"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		endpoint Endpoint
		body     string
		want     *RequestError
	}{
		{"empty body", Chat, ``, &RequestError{Err: ErrMalformedJSON}},
		{"truncated", Chat, `{"model":"hunter2"`, &RequestError{Err: ErrMalformedJSON, Offset: 18}},
		{"trailing garbage", Completions, `{"model":"m"} hunter2`, &RequestError{Err: ErrMalformedJSON, Offset: 15}},
		{"bad literal", Embeddings, `{"model":"m","input":hunter2}`, &RequestError{Err: ErrMalformedJSON, Offset: 22}},

		{"no model", Chat, `{"messages":[{"role":"user","content":"hunter2"}]}`, &RequestError{Err: ErrMissingModel, Param: "model"}},
		{"empty model", Completions, `{"model":""}`, &RequestError{Err: ErrMissingModel, Param: "model"}},
		{"null model", Embeddings, `{"model":null,"input":"x"}`, &RequestError{Err: ErrMissingModel, Param: "model"}},
		{"null body", Chat, `null`, &RequestError{Err: ErrMissingModel, Param: "model"}},

		{"body is an array", Chat, `["hunter2"]`, &RequestError{Err: ErrWrongType, Want: "an object"}},
		{"model is a number", Chat, `{"model":5}`, &RequestError{Err: ErrWrongType, Param: "model", Want: "a string"}},
		{"stream is a string", Chat, `{"model":"m","stream":"yes"}`, &RequestError{Err: ErrWrongType, Param: "stream", Want: "a boolean"}},
		{"max_tokens is a string", Chat, `{"model":"m","max_tokens":"10"}`, &RequestError{Err: ErrWrongType, Param: "max_tokens", Want: "an integer"}},
		{"max_tokens is a fraction", Completions, `{"model":"m","max_tokens":1.5}`, &RequestError{Err: ErrWrongType, Param: "max_tokens", Want: "an integer"}},
		{"max_tokens overflows", Chat, `{"model":"m","max_tokens":1e30}`, &RequestError{Err: ErrWrongType, Param: "max_tokens", Want: "an integer"}},
		{"n is a string", Chat, `{"model":"m","n":"2"}`, &RequestError{Err: ErrWrongType, Param: "n", Want: "an integer"}},
		{"messages is an object", Chat, `{"model":"m","messages":{"role":"user"}}`, &RequestError{Err: ErrWrongType, Param: "messages", Want: "an array"}},
		{"message is a string", Chat, `{"model":"m","messages":["hunter2"]}`, &RequestError{Err: ErrWrongType, Param: "messages[0]", Want: "an object"}},
		{"role is a number", Chat, `{"model":"m","messages":[{"role":"user"},{"role":1}]}`, &RequestError{Err: ErrWrongType, Param: "messages[1].role", Want: "a string"}},
		{"name is a number", Chat, `{"model":"m","messages":[{"role":"user","name":1}]}`, &RequestError{Err: ErrWrongType, Param: "messages[0].name", Want: "a string"}},
		{"content is a number", Chat, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":5}]}`, &RequestError{Err: ErrWrongType, Param: "messages[1].content", Want: "a string or an array"}},
		{"content is an object", Chat, `{"model":"m","messages":[{"role":"user","content":{"text":"hunter2"}}]}`, &RequestError{Err: ErrWrongType, Param: "messages[0].content", Want: "a string or an array"}},
		{"part is a string", Chat, `{"model":"m","messages":[{"role":"user","content":["hunter2"]}]}`, &RequestError{Err: ErrWrongType, Param: "messages[0].content[0]", Want: "an object"}},
		{"part text is a number", Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":7}]}]}`, &RequestError{Err: ErrWrongType, Param: "messages[0].content[1].text", Want: "a string"}},
		{"prompt is a number", Completions, `{"model":"m","prompt":5}`, &RequestError{Err: ErrWrongType, Param: "prompt", Want: "a string or an array"}},
		{"token ids with a string", Completions, `{"model":"m","prompt":[1,"hunter2"]}`, &RequestError{Err: ErrWrongType, Param: "prompt", Want: "an integer"}},
		{"batch with a number", Completions, `{"model":"m","prompt":["a",5]}`, &RequestError{Err: ErrWrongType, Param: "prompt[1]", Want: "a string or an array of integers"}},
		{"token array with a string", Completions, `{"model":"m","prompt":[[1],[2,"hunter2"]]}`, &RequestError{Err: ErrWrongType, Param: "prompt[1]", Want: "an integer"}},
		{"best_of is a string", Completions, `{"model":"m","best_of":"3"}`, &RequestError{Err: ErrWrongType, Param: "best_of", Want: "an integer"}},
		{"input is an object", Embeddings, `{"model":"m","input":{"text":"hunter2"}}`, &RequestError{Err: ErrWrongType, Param: "input", Want: "a string or an array"}},
		{"input token ids with a fraction", Embeddings, `{"model":"m","input":[1,2.5]}`, &RequestError{Err: ErrWrongType, Param: "input", Want: "an integer"}},

		{"zero max_tokens", Chat, `{"model":"m","max_tokens":0}`, &RequestError{Err: ErrInvalidValue, Param: "max_tokens", Want: "1 or more"}},
		{"negative max_tokens", Chat, `{"model":"m","max_tokens":-1}`, &RequestError{Err: ErrInvalidValue, Param: "max_tokens", Want: "1 or more"}},
		{"no messages", Chat, `{"model":"m"}`, &RequestError{Err: ErrInvalidValue, Param: "messages", Want: "an array of at least one message"}},
		{"empty messages", Chat, `{"model":"m","messages":[]}`, &RequestError{Err: ErrInvalidValue, Param: "messages", Want: "an array of at least one message"}},
		{"negative max_completion_tokens", Chat, `{"model":"m","max_completion_tokens":-5}`, &RequestError{Err: ErrInvalidValue, Param: "max_completion_tokens", Want: "1 or more"}},
		{"both chat caps", Chat, `{"model":"m","max_completion_tokens":1,"max_tokens":100000}`,
			&RequestError{Err: ErrUnsupportedField, Param: "max_tokens", Want: "left out when max_completion_tokens is set: give one cap"}},
		{"stream_options' include_usage spelt with capitals", Chat, `{"model":"m","stream":true,"stream_options":{"include_usage":true,"Include_Usage":false}}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "stream_options.Include_Usage", Want: `"include_usage", spelt as the API spells it`}},
		{"a Unicode fold of stream_options", Chat, `{"model":"m","stream":true,"ſtream_options":{"include_usage":false}}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "ſtream_options", Want: `"stream_options", spelt as the API spells it`}},
		{"negative max_tokens for completions", Completions, `{"model":"m","max_tokens":-1}`, &RequestError{Err: ErrInvalidValue, Param: "max_tokens", Want: "1 or more"}},
		{"zero n", Chat, `{"model":"m","n":0}`, &RequestError{Err: ErrInvalidValue, Param: "n", Want: "1 or more"}},
		{"zero best_of", Completions, `{"model":"m","best_of":0}`, &RequestError{Err: ErrInvalidValue, Param: "best_of", Want: "1 or more"}},

		{"no model", Responses, `{"input":"hunter2"}`, &RequestError{Err: ErrMissingModel, Param: "model"}},
		{"zero max_output_tokens", Responses, `{"model":"m","max_output_tokens":0}`, &RequestError{Err: ErrInvalidValue, Param: "max_output_tokens", Want: "1 or more"}},
		{"input is a number", Responses, `{"model":"m","input":5}`, &RequestError{Err: ErrWrongType, Param: "input", Want: "a string or an array"}},
		{"item is a string", Responses, `{"model":"m","input":["hunter2"]}`, &RequestError{Err: ErrWrongType, Param: "input[0]", Want: "an object"}},
		{"content is a number", Responses, `{"model":"m","input":[{"role":"user","content":7}]}`, &RequestError{Err: ErrWrongType, Param: "input[0].content", Want: "a string or an array"}},
		{"part text is a number", Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":7}]}]}`, &RequestError{Err: ErrWrongType, Param: "input[0].content[0].text", Want: "a string"}},
		{"instructions are a number", Responses, `{"model":"m","instructions":1}`, &RequestError{Err: ErrWrongType, Param: "instructions", Want: "a string or an array"}},

		// Keys the package reads, given twice or spelt with other cases, which providers read
		// otherwise: Python's json matches case, and JSON readers differ on which repeat wins.
		{"model spelt with a capital", Chat, `{"model":"o1-pro","Model":"m","messages":[{"role":"user","content":"x"}]}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "Model", Want: `"model", spelt as the API spells it`}},
		{"max_tokens given twice", Chat, `{"model":"m","max_tokens":5000,"max_tokens":1}`, &RequestError{Err: ErrAmbiguousKey, Param: "max_tokens", Want: "given once"}},
		{"service_tier given twice", Chat, `{"model":"m","service_tier":"flex","service_tier":"priority"}`, &RequestError{Err: ErrAmbiguousKey, Param: "service_tier", Want: "given once"}},
		{"service_tier spelt otherwise", Responses, `{"model":"m","Service_Tier":"priority"}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "Service_Tier", Want: `"service_tier", spelt as the API spells it`}},
		{"service_tier is a number", Chat, `{"model":"m","service_tier":2}`, &RequestError{Err: ErrWrongType, Param: "service_tier", Want: "a string"}},
		{"cap in capitals alone", Chat, `{"model":"m","MAX_TOKENS":1,"messages":[{"role":"user","content":"x"}]}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "MAX_TOKENS", Want: `"max_tokens", spelt as the API spells it`}},
		{"n spelt with a capital", Completions, `{"model":"m","n":50,"N":1}`, &RequestError{Err: ErrAmbiguousKey, Param: "N", Want: `"n", spelt as the API spells it`}},
		{"stream spelt with a capital", Chat, `{"model":"m","stream":true,"Stream":false}`, &RequestError{Err: ErrAmbiguousKey, Param: "Stream", Want: `"stream", spelt as the API spells it`}},
		{"a Unicode fold of stream", Chat, `{"model":"m","ſtream":true}`, &RequestError{Err: ErrAmbiguousKey, Param: "ſtream", Want: `"stream", spelt as the API spells it`}},
		{"an escaped key given twice", Chat, `{"model":"m","mod\u0065l":"hunter2"}`, &RequestError{Err: ErrAmbiguousKey, Param: "model", Want: "given once"}},
		{"content given twice", Chat, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":"a","content":"hunter2"}]}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "messages[1].content", Want: "given once"}},
		{"part type spelt with a capital", Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","Type":"image_url","text":"x"}]}]}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "messages[0].content[0].Type", Want: `"type", spelt as the API spells it`}},
		{"image detail given twice", Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"high","detail":"low"}}]}]}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "messages[0].content[0].image_url.detail", Want: "given once"}},
		{"responses input text twice", Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","TEXT":"hunter2"}]}]}`,
			&RequestError{Err: ErrAmbiguousKey, Param: "input[0].content[0].TEXT", Want: `"text", spelt as the API spells it`}},
		// A reader that stops at a NUL, or drops what it cannot print, would read another key.
		{"an escaped NUL in a key", Chat, `{"model":"m","model\u0000":"hunter2"}`, controlKeyError("model\x00")},
		{"an escaped newline in a key", Chat, `{"model":"m","max_tokens\n":5}`, controlKeyError("max_tokens\n")},
		{"a DEL in a key", Completions, "{\"model\":\"m\",\"n\x7f\":2}", controlKeyError("n\x7f")},
		{"an escaped DEL in a message's key", Chat, `{"model":"m","messages":[{"role":"user","content\u007f":"hunter2"}]}`,
			&RequestError{Err: ErrControlKey, Param: "messages[0].content\x7f", Want: controlKeyError("").Want}},
		{"an escaped unit separator in an item's key", Responses, `{"model":"m","input":[{"role":"user","content":"x","role\u001f":"hunter2"}]}`,
			&RequestError{Err: ErrControlKey, Param: "input[0].role\x1f", Want: controlKeyError("").Want}},
		{"embeddings input spelt with a capital", Embeddings, `{"model":"m","Input":"hunter2"}`, &RequestError{Err: ErrAmbiguousKey, Param: "Input", Want: `"input", spelt as the API spells it`}},

		// Each endpoint reads its own cap; another's would go out unread.
		{"chat with the Responses cap", Chat, `{"model":"m","max_output_tokens":5}`,
			&RequestError{Err: ErrUnsupportedField, Param: "max_output_tokens", Want: "left out: this endpoint's cap is max_completion_tokens or max_tokens"}},
		{"responses with the chat cap", Responses, `{"model":"m","max_tokens":5}`,
			&RequestError{Err: ErrUnsupportedField, Param: "max_tokens", Want: "left out: this endpoint's cap is max_output_tokens"}},
		{"completions with the chat cap", Completions, `{"model":"m","max_completion_tokens":5}`,
			&RequestError{Err: ErrUnsupportedField, Param: "max_completion_tokens", Want: "left out: this endpoint's cap is max_tokens"}},
		{"embeddings with a cap", Embeddings, `{"model":"m","input":"x","max_tokens":5}`,
			&RequestError{Err: ErrUnsupportedField, Param: "max_tokens", Want: "left out: this endpoint takes no cap"}},

		{"no input to moderate", Moderations, `{"model":"m"}`, &RequestError{Err: ErrInvalidValue, Param: "input", Want: "a string or an array"}},
		{"input to moderate is a number", Moderations, `{"input":5}`, &RequestError{Err: ErrWrongType, Param: "input", Want: "a string or an array"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.endpoint, []byte(tc.body))
			if got != nil {
				t.Errorf("Parse returned %+v, want nil", got)
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("Parse error = %v (%T), want a *RequestError", err, err)
			}
			if diff := cmp.Diff(*re, *tc.want, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("Parse error (-got +want):\n%s", diff)
			}
			if !errors.Is(err, tc.want.Err) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tc.want.Err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q quotes the body", err)
			}
		})
	}
}

// controlKeyError is the refusal of a key with a control character.
func controlKeyError(key string) *RequestError {
	return &RequestError{Err: ErrControlKey, Param: key, Want: "free of control characters (U+0000 to U+001F, U+007F)"}
}

func TestParseUnknownEndpoint(t *testing.T) {
	_, err := Parse("images", []byte(`{"model":"m"}`))
	var re *RequestError
	if err == nil || errors.As(err, &re) {
		t.Errorf("Parse error = %v, want an error that is not a *RequestError", err)
	}
}

func TestRequestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *RequestError
		want string
	}{
		{"malformed", &RequestError{Err: ErrMalformedJSON, Offset: 12}, "estimate: malformed JSON at offset 12"},
		{"missing model", &RequestError{Err: ErrMissingModel, Param: "model"}, "estimate: missing model"},
		{"wrong type", &RequestError{Err: ErrWrongType, Param: "messages[1].content", Want: "a string or an array"},
			"estimate: wrong type for messages[1].content: must be a string or an array"},
		{"wrong type of body", &RequestError{Err: ErrWrongType, Want: "an object"}, "estimate: wrong type for the body: must be an object"},
		{"invalid value", &RequestError{Err: ErrInvalidValue, Param: "max_tokens", Want: "zero or more"},
			"estimate: invalid value for max_tokens: must be zero or more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPromptString(t *testing.T) {
	p := Prompt{Texts: texts(secret, "abc"), Tokens: 7}
	got := p.String()
	if want := "{2 texts, 10 bytes, 7 tokens}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// sized is want with the Size of body, which every Parse sets.
func sized(want *Request, body string) *Request {
	w := *want
	w.Size = int64(len(body))
	return &w
}

// texts are a prompt's texts, as Parse holds them.
func texts(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, t := range s {
		out[i] = []byte(t)
	}
	return out
}
