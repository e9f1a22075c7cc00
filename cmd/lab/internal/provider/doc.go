// Package provider simulates a hosted model provider: one account of
// OpenAI's API, or of Anthropic's ([Options.API]; see "An Anthropic
// account" below), with its limits, its latency and its bill, for the lab
// to push load against and for end-to-end tests to check a gateway's books
// against.
//
// An OpenAI account serves POST /v1/chat/completions, /v1/completions and
// /v1/embeddings (JSON, or server-sent events with "stream": true), GET
// /v1/models, and the Responses API with the responses it keeps (below),
// and answers as a provider does at its limits:
//
//   - 401 in OpenAI's error body when the bearer key is wrong (if
//     [Options.APIKey] is set); 400 for a body it cannot read or a model it
//     does not serve.
//   - 429 when a limit would be exceeded, with retry-after (whole seconds,
//     rounded up) and retry-after-ms, and a message and error type saying
//     which: "requests" for the rolling minute's requests,
//     "requests_per_day" for the day's, "tokens" for the minute's tokens,
//     "input_tokens" and "output_tokens" for its input and output tokens.
//     A call that asks more tokens of one kind than the whole minute allows
//     is refused as too large, without retry-after.
//   - 503 with type overloaded_error, at once, when [Options.MaxInFlight]
//     calls are already running.
//
// (An Anthropic account answers as Anthropic does; see below.)
//
// # Limits
//
// The minute is rolling and exact: a call counts in it from the moment it
// is admitted until exactly 60 s later, as
//
//   - one request;
//   - its prompt and completion tokens (see package openai for how they
//     are counted), its completion at its cap (max_completion_tokens,
//     max_tokens or max_output_tokens, else [Options.DefaultMaxTokens]), as
//     OpenAI counts tokens;
//   - its input tokens: its prompt but what it reads from the cache (all of
//     it with [Options.CachedCountsAsInput]), as Anthropic counts them;
//   - its output tokens: its cap until it ends, then the completion tokens
//     it made, none if its client left.
//
// A day of [Options.RequestsPerDay] begins at midnight in
// [Options.DayTimeZone] (Pacific time, as Gemini's), whatever its length
// across a change of summer time. [Options.Clock] tells the time for all
// of them.
//
// Every API answer carries OpenAI's x-ratelimit-limit-, -remaining- and
// -reset-requests and -tokens, the reset how long until the minute is empty
// again; and, for each of [Options.InputTokensPerMinute] and
// [Options.OutputTokensPerMinute] that is set, Anthropic's
// anthropic-ratelimit-input-tokens- (or output-tokens-) limit, remaining
// and reset, the reset the RFC 3339 time, rounded up to the second, when
// the minute next holds none of them.
//
// # Bills
//
// An admitted call takes [Options.Latency], spread normally by
// [Options.LatencyStdDev], whatever its size; a stream spreads it over its
// chunks. A client that leaves mid-call frees its slot at once and, on an
// OpenAI account, is not billed. A served call is billed each class of its
// tokens at its price, times the multiplier of its service tier, rounded up
// to a whole micro-dollar (see [Bill] and [Options]):
//
//   - A chat or a response whose prompt shares 1,024 or more leading
//     tokens with the prompt of an earlier call to the same model, within
//     [Options.CacheTTL] of the last call that had them, reads them from
//     the cache, as OpenAI caches: the longest such prefix of 1,024, 1,152,
//     1,280... tokens, never more than its text. A token of a prefix is
//     four bytes of the text package openai counts (the messages of a
//     chat, joined; the instructions, tools and items of a response, and
//     before them the text of the chain its previous response ends, that
//     response's output included), so two prompts share a prefix of n
//     tokens when their first 4n bytes are the same.
//   - A chat or a response of a reasoning model ([Options.ReasoningModels])
//     reasons [Options.ReasoningTokens] of its completion, within its cap,
//     before it answers. A model answers up to its cap, or
//     [Options.AnswerTokens] after reasoning, if that is set and shorter,
//     and finishes for "length" only when it reached a cap the request set.
//   - Each input_audio part of a chat is [Options.AudioTokensPerPart] audio
//     prompt tokens; a chat whose modalities include "audio" answers half
//     its answer, rounded down, in audio, which the answer does not carry.
//   - A chat or a response whose service_tier is "priority" or "flex" is
//     served and billed at that tier, and any other at "default"; the
//     answer's service_tier says which.
//
// A chat's usage reports the classes as OpenAI does, in
// prompt_tokens_details (cached_tokens, audio_tokens) and
// completion_tokens_details (reasoning_tokens, audio_tokens, and
// accepted_ and rejected_prediction_tokens, always 0), in its JSON and in
// the last chunk of its stream; a response's, in input_tokens_details and
// output_tokens_details. GET /stats returns the counts as JSON ([Stats]):
// the calls by outcome, the tokens billed by class, what they cost in all
// and at each tier, every API request received by route; and GET /metrics
// the same numbers for Prometheus.
//
// # Responses
//
// POST /v1/responses (not on an Azure account) takes a string or an array
// of items as input, and answers OpenAI's Response object: one assistant
// message of filler text, always completed, its output max_output_tokens
// (at least 16, else the server's default) less what the model reasons, or
// shorter as above. Its input tokens are what the body shows,
// counted as package openai counts a Responses request, and the context a
// real provider bills but the body does not show: [Options.FileTokens] for
// each input_file part that names a file by file_id or file_url,
// [Options.ToolTokens] for each file_search, web_search or
// web_search_preview tool, and, for a call that names a
// previous_response_id, that response's input and output tokens, which
// hold the whole chain before it. A previous response that is not kept
// answers 404 previous_response_not_found; one still being made, 400. The
// call is admitted against the account's limits, cached, reasons and is
// billed as a chat call is, with its input and its output. A foreground
// response takes the account's latency, streamed as Responses events with
// "stream": true.
//
// A response is kept (store, true unless the body says false) for GET
// /v1/responses/{id}, GET /v1/responses/{id}/input_items and DELETE
// /v1/responses/{id}, which answer 404 for one not kept; at most
// [Options.MaxStored] are kept, the oldest forgotten first. A foreground
// response whose client leaves is neither billed nor kept.
//
// A background response ("background": true, which needs store) answers at
// once, queued, and is then made on its own, whatever its clients do: it
// is in progress for the account's latency, counts in flight meanwhile, and
// is billed when it completes. With "stream": true its events are also
// streamed, and kept, so that GET /v1/responses/{id}?stream=true (or with
// {"stream": true} as its body, as OpenAI's Go SDK sends it) and
// starting_after=N replays those after sequence number N and then follows
// it to its end. POST /v1/responses/{id}/cancel cancels a background
// response still queued or in progress, billed for its input, its
// reasoning and the text made so far, and returns a final one as it is; it answers 400 for a
// foreground response. [Server.Close] stops the background responses, which
// end failed and unbilled. [Stats.Responses] counts what the responses
// were billed, foreground and background apart.
//
// # An Anthropic account
//
// An account whose [Options.API] is "anthropic" serves Anthropic's Messages
// API instead, as package anthropic reads and writes it: POST /v1/messages
// (a Message object, or its events with "stream": true), POST
// /v1/messages/count_tokens and GET /v1/models (and /v1/models/{id}). Every
// answer carries a request-id, which an error body repeats as request_id,
// and errors are Anthropic's: {"type":"error","error":{"type","message"}}.
// A request without the key, in x-api-key or as a bearer token (as
// Anthropic's Go SDK sends it), answers 401 authentication_error; one
// without an anthropic-version header (of any value), 400; a model not
// served, 404 not_found_error.
//
// A call's input is its prompt as package anthropic counts it, documents it
// cannot read counting [Options.FileTokens]. A model thinks
// [Options.ReasoningTokens] if the request enables thinking, within its
// budget, and answers as package anthropic says: a tool call, or filler
// text up to max_tokens or [Options.AnswerTokens].
//
// Its cache is Anthropic's: a block whose cache_control is ephemeral ends a
// prefix (tools, then system, then messages) that a call writes to the
// cache for five minutes, or an hour with "ttl": "1h", if it has 1,024
// tokens or more, and that a later call to the same model with the same
// prefix reads within that time, which it extends. A call reads the longest
// prefix held that ends at a breakpoint or in the 20 blocks before one, A
// tokens, and writes the prefixes of its breakpoints after it, each for its
// TTL: it is billed A read, the tokens up to its last one-hour breakpoint
// after A written for an hour, and those from there to its last breakpoint
// written for five minutes. Its usage reports input_tokens, the input
// neither read nor written; cache_read_input_tokens;
// cache_creation_input_tokens and cache_creation by TTL; output_tokens,
// thinking included, and output_tokens_details.thinking_tokens; and
// service_tier "standard". [Options.MaxCachedPrefixes] bounds the prefixes
// kept, those that would expire soonest forgotten first.
//
// It limits requests a minute ([Options.RequestsPerMinute]), input tokens a
// minute ([Options.InputTokensPerMinute]: the input not read from the
// cache, what is written to it included) and output tokens a minute
// ([Options.OutputTokensPerMinute]: max_tokens until the call ends, then
// what it made), as above, and [Options.RequestsPerDay] if set; not
// [Options.TokensPerMinute]. A call refused answers 429 rate_limit_error
// with retry-after in whole seconds (none for a call larger than the
// minute); one beyond [Options.MaxInFlight], 529 overloaded_error. Every
// answer carries anthropic-ratelimit-requests-limit, -remaining and -reset,
// the same of input-tokens and output-tokens for the limits that are set,
// and of tokens, input and output added, each reset the RFC 3339 time,
// rounded up to the second, when the minute next holds none; the numbers
// are exact, where Anthropic rounds what remains of tokens to the thousand.
// count_tokens answers {"input_tokens": N}, free, under a minute of its own
// ([Options.CountTokensRequestsPerMinute]), which its requests headers
// report, as Anthropic limits it apart from the calls.
//
// A call is billed its input without the cache at
// [Options.InputMicrosPerMillion], what it reads at
// [Options.CachedInputMicrosPerMillion] (a tenth), writes for five minutes
// at [Options.CacheWriteInputMicrosPerMillion] (1.25 times) and for an hour
// at [Options.CacheWrite1hInputMicrosPerMillion] (twice), and its output at
// [Options.OutputMicrosPerMillion]. A client that leaves, streamed or not,
// is billed, as Anthropic bills it, for its input and the output made
// before it left, its latency spread over the output's deltas, and the
// minute counts that output; [Stats.Canceled] counts it.
//
// To run the reference account (1,500 RPM, 300,000 TPM, 200 in flight, $3 per
// million tokens, about 2 s a call; see [DefaultOptions]) on a port of its
// own:
//
//	lab provider -listen 127.0.0.1:8081 -api-key sk-lab
//
// or one limited as an Anthropic account is, to 40,000 input and 8,000
// output tokens a minute, and 10,000 requests a day:
//
//	lab provider -listen 127.0.0.1:8081 -api-key sk-lab \
//		-input-tokens-per-minute 40000 -output-tokens-per-minute 8000 -requests-per-day 10000
//
// or one that serves Anthropic's Messages API to claude-sonnet-5-5,
// claude-haiku-5-5 and claude-opus-5-5, limited to 50 requests, 30,000
// input and 8,000 output tokens a minute:
//
//	lab provider -listen 127.0.0.1:8081 -api anthropic -api-key sk-lab \
//		-requests-per-minute 50 -input-tokens-per-minute 30000 -output-tokens-per-minute 8000
//
// or, in Go:
//
//	p, err := provider.New(provider.DefaultOptions())
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	return http.ListenAndServe("127.0.0.1:8081", p)
package provider
