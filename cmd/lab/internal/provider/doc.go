// Package provider simulates a hosted model provider: one account of an
// OpenAI-style API with its limits, its latency and its bill, for the lab to
// push load against.
//
// It serves POST /v1/chat/completions, /v1/completions and /v1/embeddings
// (JSON, or server-sent events with "stream": true) and GET /v1/models, and
// answers as a provider does at its limits:
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
// ([Stats]) and GET /metrics the same numbers for Prometheus.
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
//	return http.ListenAndServe("127.0.0.1:8081", p)
package provider
