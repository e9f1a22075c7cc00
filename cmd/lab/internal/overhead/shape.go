package overhead

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

const (
	// model is the chat model the requests name, and encoding the one the
	// gateway counts its prompt tokens with, as a user would configure it.
	model    = "gpt-4o-mini"
	encoding = "o200k_base"
	// embeddingModel is the model the embeddings calls name, and
	// embeddingEncoding its encoding.
	embeddingModel    = "text-embedding-3-small"
	embeddingEncoding = "cl100k_base"
	// maxTokens is a short chat's max_tokens, and the stub's answer to a
	// chat that names none: that many tokens long.
	maxTokens = 16
	// streamChunks is how many chunks of text a streamed answer has; the
	// stub sends 16 tokens a chunk.
	streamChunks = 200
	// embeddingInputs is how many inputs an embeddings call has, and
	// embeddingInputTokens how long each is.
	embeddingInputs      = 64
	embeddingInputTokens = 32
	// longPromptTokens is the length of a long chat's prompt: a transcript.
	longPromptTokens = 40_000
)

// Shape is one kind of call a run sends: an endpoint and a body.
type Shape struct {
	// Name is how the flag and the report name it.
	Name     string
	endpoint openai.Endpoint
	body     []byte
}

// The shapes of call a run may send, by name; ShapeChat is the default.
const (
	// ShapeChat is a short chat that names its max_tokens.
	ShapeChat = "chat"
	// ShapeChatUncapped is the same chat naming no max_tokens.
	ShapeChatUncapped = "chat-uncapped"
	// ShapeStream is a chat answered as a stream of 200 chunks of text, with
	// its usage in a last chunk.
	ShapeStream = "stream"
	// ShapeEmbeddings is an embeddings call of 64 inputs of 32 tokens.
	ShapeEmbeddings = "embeddings"
	// ShapeLongPrompt is a chat whose prompt is a transcript of 40,000
	// tokens, with a short answer.
	ShapeLongPrompt = "long-prompt"
)

// shortPrompt is the prompt of the short chats.
const shortPrompt = "Say hello in one short sentence."

// shapes are every shape, in the order a run sends them.
var shapes = []Shape{
	{ShapeChat, openai.Chat, openai.ChatBody(model, maxTokens, shortPrompt)},
	{ShapeChatUncapped, openai.Chat, mustJSON(map[string]any{"model": model, "messages": userMessage(shortPrompt)})},
	{ShapeStream, openai.Chat, mustJSON(map[string]any{
		"model": model, "max_tokens": streamChunks * 16, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}, "messages": userMessage(shortPrompt),
	})},
	{ShapeEmbeddings, openai.Embeddings, mustJSON(map[string]any{"model": embeddingModel, "input": embeddingInput()})},
	{ShapeLongPrompt, openai.Chat, openai.ChatBody(model, maxTokens, openai.Filler(longPromptTokens))},
}

// shapeNamed is the shape of that name.
func shapeNamed(name string) (Shape, error) {
	for _, s := range shapes {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = s.Name
	}
	return Shape{}, fmt.Errorf("overhead: no shape of call %q; the shapes are %s", name, strings.Join(names, ", "))
}

func userMessage(prompt string) []map[string]string {
	return []map[string]string{{"role": "user", "content": prompt}}
}

func embeddingInput() []string {
	out := make([]string, embeddingInputs)
	for i := range out {
		out[i] = openai.Filler(embeddingInputTokens)
	}
	return out
}

// mustJSON is v's JSON; v is one of this file's literals, which always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
