// Package provider simulates a hosted model provider: one account of an
// OpenAI-style API with its limits, its latency and its bill, for the lab to
// push load against.
//
// It serves POST /v1/chat/completions, /v1/completions and /v1/embeddings
// (JSON, or server-sent events with "stream": true), GET /v1/models, and the
// Responses API with the responses it keeps (below), and answers as a
// provider does at its limits:
//
//   - 401 in OpenAI's error body when the bearer key is wrong (if
//     [Options.APIKey] is set); 400 for a body it cannot read or a model it
//     does not serve.
//   - 429 when the rolling minute's requests or tokens would be exceeded,
//     with retry-after (whole seconds, rounded up) and retry-after-ms, and a
//     message and error type ("requests" or "tokens") saying which ran out.
//   - 503 with type overloaded_error, at once, when [Options.MaxInFlight]
//     calls are already running.
//
// The minute is rolling and exact: a call counts one request and its prompt
// and completion tokens (see package openai for how they are counted) from
// the moment it is admitted until exactly 60 s later. Every API answer
// carries x-ratelimit-limit-, -remaining- and -reset-requests and -tokens;
// the reset is how long until the minute is empty again.
//
// An admitted call takes [Options.Latency], spread normally by
// [Options.LatencyStdDev], whatever its size; a stream spreads it over its
// chunks. A client that leaves mid-call frees its slot at once and is not
// billed. Served calls are billed at the account's prices in whole
// micro-dollars, rounded up per call. GET /stats returns the counts as JSON
// ([Stats]), every API request received among them, by route, and GET
// /metrics the same numbers for Prometheus.
//
// # Responses
//
// POST /v1/responses (not on an Azure account) takes a string or an array
// of items as input, and answers OpenAI's Response object: one assistant
// message of max_output_tokens (at least 16, else the server's default) of
// filler text, always completed. Its input tokens are what the body shows,
// counted as package openai counts a Responses request, and the context a
// real provider bills but the body does not show: [Options.FileTokens] for
// each input_file part that names a file by file_id or file_url,
// [Options.ToolTokens] for each file_search, web_search or
// web_search_preview tool, and, for a call that names a
// previous_response_id, that response's input and output tokens, which
// hold the whole chain before it. A previous response that is not kept
// answers 404 previous_response_not_found; one still being made, 400. The
// call is admitted against the account's limits as a chat call is, with
// its input and its output. A foreground response takes the account's
// latency, streamed as Responses events with "stream": true.
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
// response still queued or in progress, billed for its input and the text
// made so far, and returns a final one as it is; it answers 400 for a
// foreground response. [Server.Close] stops the background responses, which
// end failed and unbilled. [Stats.Responses] counts what the responses
// were billed, foreground and background apart.
//
// To run the reference account (1,500 RPM, 300,000 TPM, 200 in flight, $3 per
// million tokens, about 2 s a call) on a port of its own:
//
//	lab provider -listen 127.0.0.1:8081 -api-key sk-lab
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
