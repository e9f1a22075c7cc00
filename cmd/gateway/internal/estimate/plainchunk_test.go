package estimate

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkPlainChunk fails when plainChunk reads data otherwise than encoding/json does, and
// reports whether it read it.
func checkPlainChunk(t *testing.T, data []byte) bool {
	t.Helper()
	var got streamChunk
	if !plainChunk(data, &got) {
		return false
	}
	var want streamChunk
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("plainChunk(%q) reads it, but encoding/json refuses it: %v", data, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plainChunk(%q) (-encoding/json +plain):\n%s", data, diff)
	}
	return true
}

// plainChunks are chunks as providers stream them, which plainChunk reads.
var plainChunks = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"obfuscation":"x"}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello, \"world\"\n caf\u00e9 😀"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
	`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":" the lab","index":0,"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[]}`, `{"choices":null}`, `{}`, `{ "choices" : [ { "delta" : { "content" : "a" } } , { "text" : "b" } ] } `,
	`{"service_tier":null,"choices":[{"delta":null,"text":null}]}`, `{"delta":null,"usage":null}`,
	`{"choices":[{"delta":{"content":null,"tool_calls":null}}],"type":null,"response":null,"item":null,"message":null}`,
}

// otherChunks are chunks plainChunk leaves to encoding/json.
var otherChunks = []string{
	`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":16,"total_tokens":21}}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"type":"response.output_text.delta","delta":"hi"}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
	`{"Choices":[{"delta":{"content":"a"}}]}`,
	`{"choices":[{"delta":{"Content":"a"}}]}`,
	`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choic\u0065s":[]}`,
	`{"choices":{}}`,
	`{"choices":[1]}`,
	`[DONE]`, `{"choices":[`, `[]`, `"x"`,
}

func TestPlainChunk(t *testing.T) {
	for _, data := range plainChunks {
		if !checkPlainChunk(t, []byte(data)) {
			t.Errorf("plainChunk(%s) left it to encoding/json; want it read", data)
		}
	}
	for _, data := range otherChunks {
		if checkPlainChunk(t, []byte(data)) {
			t.Errorf("plainChunk(%s) read it; want it left to encoding/json", data)
		}
	}
}

func FuzzPlainChunk(f *testing.F) {
	for _, data := range append(plainChunks, otherChunks...) {
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkPlainChunk(t, data) })
}
