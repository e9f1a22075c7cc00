package openai

import "encoding/json"

// chatMessage is one message of a chat completion request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body ChatBody writes.
type chatRequest struct {
	Model     string        `json:"model"`
	MaxTokens int64         `json:"max_tokens"`
	Messages  []chatMessage `json:"messages"`
}

// ChatBody is the body of a chat completion that asks model for at most maxTokens tokens
// in answer to one user message, prompt: the request the lab's loads send.
func ChatBody(model string, maxTokens int64, prompt string) []byte {
	body, _ := json.Marshal(chatRequest{model, maxTokens, []chatMessage{{Role: "user", Content: prompt}}}) // strings and an int: it cannot fail
	return body
}
