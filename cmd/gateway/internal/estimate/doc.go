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
// any other part but an image (audio, a file) counts as its JSON text by the
// proxy, since its formula is not known before the call. A prompt or input
// given as token ids counts exactly one token per id.
//
// What the provider renders into the prompt its own way counts as its compact
// JSON text by the proxy, whatever the encoding: tools, functions,
// response_format (a schema included), a message's tool calls, every field of
// a message the package does not read, and every field of the body the
// package does not know to be free (see objectRules): one a provider or an
// inference server adds to OpenAI's API may reach the model. The proxy counts
// JSON a little above the encodings do.
//
// # One reading
//
// The gateway forwards the bytes it read, so a body must mean to the package
// what it means to any provider. In every object the package reads, a key it
// reads that is given twice, or spelt with other cases than the API's, is
// refused with [ErrAmbiguousKey]: Python's json matches keys with case, Go's
// encoding/json without, and JSON readers differ on which of a repeat wins.
// A cap field of another endpoint is refused with [ErrUnsupportedField]: the
// provider would not read it.
//
// An image part counts by the formula of its model's family (see
// imageFamilies), from OpenAI's vision guide: gpt-4o, gpt-4.1 and gpt-4.5 count
// 85 tokens and, at high detail, 170 for each 512-pixel tile of the image
// scaled to fit 2048×2048 and then to a shortest side of 768; gpt-4o-mini, o1,
// o3 and gpt-5 the same with their own numbers; gpt-4.1-mini, gpt-4.1-nano,
// gpt-5-mini, gpt-5-nano and o4-mini count 32-pixel patches, at most 1536,
// times their multiplier. The size of a PNG, JPEG or GIF sent as a data URL
// is read from its header; an image sent by URL (or in another format) counts
// as the largest its formula allows (1445 tokens for gpt-4o at high detail).
// A detail other than "low" counts as high. Every other model counts as
// gpt-4o does, which is about right for Claude (about width × height / 750,
// at most about 1,600) and Gemini (258 a tile), but not an upper bound for
// them, nor for a vision model an inference server runs.
//
// # Completion tokens
//
// The completion estimate is max_completion_tokens, else max_tokens, else a
// default the caller passes for the model, times the number of completions
// the provider generates ([Request.N]). Embeddings have none. The estimate is
// an upper bound only if the provider is told the cap: [WithMaxTokens] adds
// the default to a body that sets none.
//
// A provider that counts a call's tokens when it admits it may count
// characters rather than tokens: OpenAI documents that it estimates from the
// request's characters (about four a token) and max_tokens.
// [Estimate.CharacterTotal] is that count.
//
// # Settlement
//
// [ParseUsage] reads the usage of a response that was not streamed: its prompt
// and completion tokens, of them those of each class a provider bills at its
// own price (cached and audio prompt tokens, reasoning and audio completion
// tokens, from the usage's details objects), and the service tier the answer
// says served it. A streamed response is settled from its final usage chunk,
// which [WithStreamUsage] asks the provider for; [StreamUsage] remembers that
// chunk and, if none arrives, counts the completion text it saw.
// [Usage.Within] bounds a usage by what the call could have used.
//
// A request's service_tier is read as [Request.ServiceTier], the tier its
// estimate is priced at.
//
// Errors from [Parse] are [*RequestError] values that wrap one of the Err
// sentinels, so the HTTP layer can answer with a 400 in OpenAI's error shape.
// They name the field at fault and never quote the body.
package estimate
