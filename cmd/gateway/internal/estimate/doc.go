// Package estimate reads an OpenAI-style request body once and estimates its
// cost in tokens before the call, and reads what the provider reports after it
// so the gateway can settle the difference.
//
// # Prompt tokens
//
// Text is counted with the model's byte-pair encoding when the caller names
// one the package knows (cl100k_base, o200k_base, p50k_base, p50k_edit,
// r50k_base). The encodings are compiled into the binary and loaded lazily,
// once each, on first use; nothing is downloaded at run time. When the
// encoding is empty or unknown, the count is the documented proxy
//
//	ceil(UTF-8 bytes / 4)
//
// which is OpenAI's rule of thumb for English text (about four characters a
// token); it undercounts code and most non-Latin scripts.
//
// A chat request is counted as OpenAI's cookbook counts it: 3 tokens for each
// message, its role, name (plus 1 token) and content, and 3 tokens that prime
// the reply. Text and refusal parts of an array content are counted as text;
// each image part counts a fixed [ImageTokens] (a 1024×1024 image at high
// detail: 85 + 4 tiles × 170), or [LowDetailImageTokens] when its detail is
// "low"; audio and file parts are not counted before the call. Tool calls,
// tools and functions are counted as their compact JSON text, which is a
// little more than the provider's own rendering. A prompt or input given as
// token ids counts exactly one token per id.
//
// # Completion tokens
//
// The completion estimate is max_completion_tokens, else max_tokens, else a
// default the caller passes for the model, times the number of completions
// the provider generates ([Request.N]). Embeddings have none.
//
// # Settlement
//
// [ParseUsage] reads the usage of a response that was not streamed. A streamed
// response is settled from its final usage chunk, which [WithStreamUsage] asks
// the provider for; [StreamUsage] remembers that chunk and, if none arrives,
// counts the completion text it saw.
//
// Errors from [Parse] are [*RequestError] values that wrap one of the Err
// sentinels, so the HTTP layer can answer with a 400 in OpenAI's error shape.
// They name the field at fault and never quote the body.
package estimate
