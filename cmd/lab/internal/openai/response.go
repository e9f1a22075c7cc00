package openai

import (
	"net/http"
	"strconv"
)

// Usage is an answer's usage block.
type Usage struct {
	// PromptTokens is usage.prompt_tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// CompletionTokens is usage.completion_tokens.
	CompletionTokens int64 `json:"completion_tokens"`
	// TotalTokens is usage.total_tokens, the sum of the other two.
	TotalTokens int64 `json:"total_tokens"`
	// PromptTokensDetails is usage.prompt_tokens_details; nil leaves it
	// out, as vLLM does.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
	// CompletionTokensDetails is usage.completion_tokens_details; nil
	// leaves it out.
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails are the classes of a chat's prompt tokens, each also
// counted in prompt_tokens.
type PromptTokensDetails struct {
	// CachedTokens are the prompt's leading tokens read from the cache.
	CachedTokens int64 `json:"cached_tokens"`
	// AudioTokens are the prompt's audio.
	AudioTokens int64 `json:"audio_tokens"`
}

// CompletionTokensDetails are the classes of a chat's completion tokens,
// each also counted in completion_tokens. The simulators make no
// predictions, so those counts are always zero.
type CompletionTokensDetails struct {
	// ReasoningTokens are the tokens the model reasoned, which the answer
	// does not show.
	ReasoningTokens int64 `json:"reasoning_tokens"`
	// AudioTokens are the answer's audio.
	AudioTokens              int64 `json:"audio_tokens"`
	AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
}

// Reply is the content of one answer, whether it is written as JSON or
// streamed.
type Reply struct {
	// ID is the answer's id, such as "chatcmpl-7".
	ID string
	// Created is when it was made, in seconds since the Unix epoch.
	Created int64
	// Model is the model that answered.
	Model string
	// Text is the completion: Filler of the request's completion tokens.
	Text string
	// FinishReason is "length" when the request capped the completion,
	// else "stop".
	FinishReason string
	// Usage is what the answer cost.
	Usage Usage
	// Inputs is how many embeddings an Embeddings answer has.
	Inputs int
	// ServiceTier is the tier that served a chat, written in every chunk
	// of it; empty leaves it out, as vLLM does.
	ServiceTier string
}

// NewReply is the answer to req: its id is the endpoint's prefix and seq.
func NewReply(req Request, seq uint64, created int64) Reply {
	rep := Reply{
		ID:           idPrefix[req.Endpoint] + strconv.FormatUint(seq, 10),
		Created:      created,
		Model:        req.Model,
		Text:         Filler(req.CompletionTokens),
		FinishReason: "stop",
		Usage:        Usage{PromptTokens: req.PromptTokens, CompletionTokens: req.CompletionTokens, TotalTokens: req.Tokens()},
		Inputs:       req.Inputs,
	}
	if req.Capped {
		rep.FinishReason = "length"
	}
	return rep
}

var idPrefix = map[Endpoint]string{Chat: "chatcmpl-", Completions: "cmpl-", Embeddings: "embd-"}

// object is the "object" of an answer to e, streamed or not.
func object(e Endpoint, stream bool) string {
	switch {
	case e == Chat && stream:
		return "chat.completion.chunk"
	case e == Chat:
		return "chat.completion"
	case e == Completions:
		return "text_completion"
	}
	return "list"
}

// completion is a chat or completion answer, or one chunk of its stream.
type completion struct {
	ID          string   `json:"id"`
	Object      string   `json:"object"`
	Created     int64    `json:"created"`
	Model       string   `json:"model"`
	ServiceTier string   `json:"service_tier,omitempty"`
	Choices     []choice `json:"choices"`
	Usage       *Usage   `json:"usage,omitempty"`
}

// choice is a chat choice (Message, or Delta when streamed) or a
// completion choice (Text).
type choice struct {
	Index        int      `json:"index"`
	Message      *message `json:"message,omitempty"`
	Delta        *message `json:"delta,omitempty"`
	Text         *string  `json:"text,omitempty"`
	FinishReason *string  `json:"finish_reason"`
}

type message struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// WriteReply answers w with rep as JSON, in e's shape.
func WriteReply(w http.ResponseWriter, e Endpoint, rep Reply) {
	if e == Embeddings {
		WriteJSON(w, http.StatusOK, embeddings(rep))
		return
	}
	c := rep.completion(e, false)
	c.Choices = []choice{makeChoice(e, false, &rep.Text, &rep.FinishReason)}
	c.Usage = &rep.Usage
	WriteJSON(w, http.StatusOK, c)
}

// completion is rep's envelope, without choices.
func (rep Reply) completion(e Endpoint, stream bool) completion {
	return completion{ID: rep.ID, Object: object(e, stream), Created: rep.Created, Model: rep.Model, ServiceTier: rep.ServiceTier}
}

// makeChoice is a choice of e's shape with text (nil for none) and finish
// (nil for null).
func makeChoice(e Endpoint, stream bool, text, finish *string) choice {
	c := choice{FinishReason: finish}
	switch {
	case e == Completions:
		c.Text = text
		if c.Text == nil {
			c.Text = new(string)
		}
	case stream:
		c.Delta = &message{Content: text}
	default:
		c.Message = &message{Role: "assistant", Content: text}
	}
	return c
}

// embeddingDims is the length of the lab's embeddings: a fixed unit vector.
const embeddingDims = 16

type embeddingList struct {
	Object string         `json:"object"`
	Data   []embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  embeddingUsage `json:"usage"`
}

type embedding struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float64 `json:"embedding"`
}

type embeddingUsage struct {
	PromptTokens int64 `json:"prompt_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

func embeddings(rep Reply) embeddingList {
	vec := make([]float64, embeddingDims)
	for i := range vec {
		vec[i] = 0.25 // 16 × 0.25² = 1: a unit vector
	}
	l := embeddingList{Object: "list", Model: rep.Model, Usage: embeddingUsage{rep.Usage.PromptTokens, rep.Usage.PromptTokens}}
	for i := range rep.Inputs {
		l.Data = append(l.Data, embedding{Object: "embedding", Index: i, Embedding: vec})
	}
	return l
}

// WriteModels answers GET /v1/models with models, owned by owner.
func WriteModels(w http.ResponseWriter, owner string, models []string) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range models {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: owner})
	}
	WriteJSON(w, http.StatusOK, list)
}
