package estimate

import (
	"reflect"
	"slices"
)

// The rules of each endpoint's body (see objectRule). The free keys are those the package
// reads or knows to add nothing to the prompt. Every other key, one a provider or an inference
// server adds to OpenAI's API (a predicted output, a guided-decoding schema, documents, a chat
// template's arguments) or one added after these lists were written, counts as its JSON text by
// the proxy: it may reach the model. So does every key that the package does not read of a chat
// message (an assistant's refusal or audio, a reasoning text a chat template renders), of a
// content part (a file, audio) and of a Responses item or part. The cap
// of another endpoint is refused, as OpenAI refuses it: the provider would not read it, and the
// call would go out without the cap its estimate assumed.
var objectRules = map[reflect.Type]objectRule{
	reflect.TypeFor[messagesBody]():     messagesRule,
	reflect.TypeFor[messagesMessage]():  {counted: true},
	reflect.TypeFor[messageBlock]():     messageBlockRule,
	reflect.TypeFor[chatBodyMessages](): chatRule,
	reflect.TypeFor[chatBody]():         chatRule,
	reflect.TypeFor[chatMessage]():      {counted: true},
	reflect.TypeFor[contentPart]():      {counted: true, free: fieldSet("type")},
	reflect.TypeFor[responseItem]():     {counted: true, free: fieldSet("type", "id", "status")},
	reflect.TypeFor[responsePart]():     {counted: true, free: fieldSet("type")},
	reflect.TypeFor[completionsBody](): {counted: true, free: fieldSet("model", "prompt", "suffix", "best_of", "echo",
		"stream", "stream_options", "max_tokens", "n", "temperature", "top_p", "seed", "stop",
		"presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "user"),
		foreign: foreignCaps(MaxTokens)},
	reflect.TypeFor[embeddingsBody](): {counted: true, free: fieldSet("model", "input", "encoding_format", "dimensions", "user"),
		foreign: foreignCaps()},
	reflect.TypeFor[responsesBody](): {counted: true, free: fieldSet("model", "input", "instructions", "tools", "text", "stream",
		"stream_options", "max_output_tokens", "temperature", "top_p", "top_logprobs",
		"tool_choice", "parallel_tool_calls", "max_tool_calls", "reasoning", "truncation",
		"include", "previous_response_id", "conversation", "background", "store", "metadata",
		"user", "service_tier", "safety_identifier", "prompt_cache_key"),
		foreign: foreignCaps(MaxOutputTokens)},
}

var chatRule = objectRule{counted: true, free: fieldSet("model", "messages", "tools", "functions", "response_format",
	"stream", "stream_options", "max_tokens", "max_completion_tokens", "n",
	"temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty",
	"logit_bias", "logprobs", "top_logprobs", "user", "parallel_tool_calls", "store",
	"service_tier", "reasoning_effort", "modalities", "audio", "metadata",
	"safety_identifier", "prompt_cache_key", "verbosity"),
	foreign: foreignCaps(MaxCompletionTokens, MaxTokens)}

func fieldSet(names ...string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// foreignCaps are the cap fields an endpoint that reads own refuses: every other one.
func foreignCaps(own ...string) map[string]string {
	instead := "this endpoint takes no cap"
	if len(own) > 0 {
		instead = "this endpoint's cap is " + own[0]
		if len(own) > 1 {
			instead += " or " + own[1]
		}
	}
	foreign := make(map[string]string)
	for _, name := range []string{MaxCompletionTokens, MaxTokens, MaxOutputTokens} {
		if !slices.Contains(own, name) {
			foreign[name] = instead
		}
	}
	return foreign
}
