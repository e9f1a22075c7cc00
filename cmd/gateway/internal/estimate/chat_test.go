package estimate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChatReadInOnePassAsByMessage checks that the one-pass reading of a chat request finds
// what reading it message by message finds.
func TestChatReadInOnePassAsByMessage(t *testing.T) {
	bodies := []string{
		`{"model":"m","messages":[{"role":"user","content":"Say hello."}]}`,
		`{"model":"m","max_tokens":16,"n":2,"stream":true,"messages":[{"role":"system","content":"Be brief.","name":"rules"},{"role":"user","content":null}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"model":"m","messages":[null,{"role":"user","content":"x"}],"functions":[{"name":"g"}]}`,
	}
	for _, body := range bodies {
		got, err := parseChat([]byte(body))
		if err != nil {
			t.Fatalf("parseChat(%s): %v", body, err)
		}
		want, err := parseChatByMessage([]byte(body))
		if err != nil {
			t.Fatalf("parseChatByMessage(%s): %v", body, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: one pass (-by message +one pass):\n%s", body, diff)
		}
	}
}
