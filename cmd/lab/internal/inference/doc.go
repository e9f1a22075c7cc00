// Package inference simulates a self-hosted inference server in the style
// of vLLM, for the lab and for end-to-end tests of autoscaling on waiting
// requests.
//
// It batches continuously: up to max-num-seqs sequences per GPU run at once,
// and the rest wait in the server's own FIFO queue and start the moment a
// running sequence finishes or its client leaves. Each running sequence
// makes one token every
//
//	token-latency × (1 + running/capacity)
//
// where running is the batch's size at that moment and capacity is
// max-num-seqs × GPUs: the base latency for a lone sequence, twice it for a
// full batch. A request of N completion tokens in a steady batch takes N
// times that; the prompt costs no time. The answer (JSON, or server-sent
// events with "stream": true, sent all at once when the sequence finishes)
// carries usage counted as package openai counts it.
//
// It serves POST /v1/chat/completions and /v1/completions, GET /v1/models,
// GET /health, and at GET /metrics three gauges in the names of the engine
// it passes for (one table, engines, holds them):
//
//	engine    waiting                     running                       KV cache (running/capacity)
//	vllm      vllm:num_requests_waiting   vllm:num_requests_running     vllm:kv_cache_usage_perc
//	tgi       tgi_queue_size              tgi_batch_current_size        -
//	sglang    sglang:num_queue_reqs       sglang:num_running_reqs       sglang:token_usage
//	llamacpp  llamacpp:requests_deferred  llamacpp:requests_processing  llamacpp:kv_cache_usage_ratio
//
// vLLM and SGLang label them with model_name, as those engines do; TGI and
// llama.cpp have no labels.
//
// To run one Pod's server on its own loopback address:
//
//	lab inference -listen 127.0.0.5:8000 -engine vllm -gpus 1 -max-num-seqs 16
//
// or, in Go, keeping Run running while the server serves:
//
//	s, err := inference.New(inference.DefaultOptions())
//	if err != nil {
//		return err
//	}
//	go s.Run(ctx)
//	return http.ListenAndServe("127.0.0.5:8000", s)
package inference
