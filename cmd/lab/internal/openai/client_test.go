package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChatBody(t *testing.T) {
	body := ChatBody("gpt-4o-mini", 16, "Say hello.")
	if want := `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}`; string(body) != want {
		t.Errorf("ChatBody = %s; want %s", body, want)
	}
	got, err := Parse(Chat, ChatBody("m", 200, Filler(600)), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Endpoint: Chat, Model: "m", PromptTokens: 600, PromptText: Filler(600), CompletionTokens: 200, Capped: true, ServiceTier: "default"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("ChatBody read back (-got +want):\n%s", diff)
	}
}
