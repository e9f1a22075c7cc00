package estimate

import "bytes"

// The fields of each endpoint's body that the package reads or knows to add nothing to the
// prompt: sampling and output settings, streaming, metadata the provider stores. Every other
// field, one a provider or an inference server adds to OpenAI's API (a predicted output, a
// guided-decoding schema, documents, a chat template's arguments) or one added after this list
// was written, counts as its JSON text by the proxy: it may reach the model.
var (
	chatFields = fieldSet("model", "messages", "tools", "functions", "response_format",
		"stream", "stream_options", "max_tokens", "max_completion_tokens", "n",
		"temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty",
		"logit_bias", "logprobs", "top_logprobs", "user", "parallel_tool_calls", "store",
		"service_tier", "reasoning_effort", "modalities", "audio", "metadata",
		"safety_identifier", "prompt_cache_key", "verbosity")
	completionsFields = fieldSet("model", "prompt", "suffix", "best_of", "echo",
		"stream", "stream_options", "max_tokens", "n", "temperature", "top_p", "seed", "stop",
		"presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "user")
	embeddingsFields = fieldSet("model", "input", "encoding_format", "dimensions", "user")
	responsesFields  = fieldSet("model", "input", "instructions", "tools", "text", "stream",
		"stream_options", "max_output_tokens", "temperature", "top_p", "top_logprobs",
		"tool_choice", "parallel_tool_calls", "max_tool_calls", "reasoning", "truncation",
		"include", "previous_response_id", "conversation", "background", "store", "metadata",
		"user", "service_tier", "safety_identifier", "prompt_cache_key")
)

func fieldSet(names ...string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// addUnknownFields adds each field of body that known does not hold as its JSON text by the
// proxy, its name included, in one pass over body that decodes nothing. body has decoded
// already.
func (p *Prompt) addUnknownFields(body []byte, known map[string]bool) {
	eachTopField(body, func(name, value []byte) {
		if !known[string(name)] {
			p.addTokens(proxyBytes(len(name) + len(value)))
		}
	})
}

// eachTopField calls fn with the name and raw value of each field of a JSON object's top level,
// in one pass that follows strings and depth and decodes nothing. It stops at a string that does
// not end.
func eachTopField(body []byte, fn func(name, value []byte)) {
	depth, nameStart, nameEnd, valueAt := 0, 0, 0, -1
	field := func(end int) {
		fn(body[nameStart:nameEnd], bytes.TrimSpace(body[valueAt:end]))
		valueAt = -1
	}
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			end := stringEnd(body, i)
			if end < 0 {
				return
			}
			if depth == 1 && valueAt < 0 {
				if at := valueStart(body, end); at >= 0 {
					nameStart, nameEnd, valueAt = i+1, end-1, at
				}
			}
			i = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 && valueAt >= 0 {
				field(i)
			}
		case ',':
			if depth == 1 && valueAt >= 0 {
				field(i)
			}
		}
	}
}
