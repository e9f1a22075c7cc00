package metrics

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

// The samples below are written after each engine's documentation and
// source, cited on each; the values are made up, the names, types and label
// sets are the engines'.

// vllmSample is vLLM's OpenAI server with two data-parallel engines: names
// and model_name from docs.vllm.ai "Production Metrics", engine from
// vllm/v1/metrics/loggers.py (one label value per data-parallel rank).
const vllmSample = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 16.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 14.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.62
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.58
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 51214.0
vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 912.0
vllm:iteration_tokens_total_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 912.0
`

// rayServeVLLMSample is vLLM under Ray Serve, scraped from Ray's metrics
// agent on a worker Pod that holds two replicas: Ray prefixes ray_ and
// turns ':' into '_' (vllm/v1/metrics/ray_wrappers.py), and labels by
// worker and replica (ray-project/ray
// python/ray/dashboard/modules/metrics/dashboards/serve_llm_dashboard_panels.py
// filters on WorkerId and ReplicaId).
const rayServeVLLMSample = `# HELP ray_vllm_num_requests_waiting Number of requests waiting to be processed.
# TYPE ray_vllm_num_requests_waiting gauge
ray_vllm_num_requests_waiting{Component="core_worker",NodeAddress="10.8.2.17",ReplicaId="qwen:4kx2p1",SessionName="session_2025-06-02_10-11-02_441309_1",Version="2.46.0",WorkerId="5b1e0c8a",engine="0",model_name="qwen2.5-7b"} 2.0
ray_vllm_num_requests_waiting{Component="core_worker",NodeAddress="10.8.2.17",ReplicaId="qwen:9tq7mz",SessionName="session_2025-06-02_10-11-02_441309_1",Version="2.46.0",WorkerId="c04d99f1",engine="0",model_name="qwen2.5-7b"} 5.0
# HELP ray_vllm_num_requests_running Number of requests in model execution batches.
# TYPE ray_vllm_num_requests_running gauge
ray_vllm_num_requests_running{Component="core_worker",NodeAddress="10.8.2.17",ReplicaId="qwen:4kx2p1",SessionName="session_2025-06-02_10-11-02_441309_1",Version="2.46.0",WorkerId="5b1e0c8a",engine="0",model_name="qwen2.5-7b"} 24.0
ray_vllm_num_requests_running{Component="core_worker",NodeAddress="10.8.2.17",ReplicaId="qwen:9tq7mz",SessionName="session_2025-06-02_10-11-02_441309_1",Version="2.46.0",WorkerId="c04d99f1",engine="0",model_name="qwen2.5-7b"} 31.0
# HELP ray_serve_deployment_queued_queries The current number of queries to this deployment waiting to be assigned to a replica.
# TYPE ray_serve_deployment_queued_queries gauge
ray_serve_deployment_queued_queries{application="llm",deployment="LLMServer:qwen"} 0.0
`

// sglangSample is SGLang at tensor parallelism 4 with
// --enable-metrics-for-all-schedulers: every tensor rank repeats its
// group's counts. Names and labels from sgl-project/sglang
// python/sglang/srt/observability/metrics_collector.py
// (SchedulerMetricsCollector.init_new).
const sglangSample = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 21.0
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 21.0
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="2"} 21.0
sglang:num_running_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="3"} 21.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 6.0
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 6.0
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="2"} 6.0
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="3"} 6.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="Qwen/Qwen2.5-72B-Instruct",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.41
`

// sglangDPAttentionSample is SGLang with data-parallel attention (dp 2,
// tensor parallelism 4) and all schedulers reporting: each data-parallel
// group has its own queue, labelled dp_rank, repeated by its tensor ranks.
// Same source as sglangSample.
const sglangDPAttentionSample = `# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2.0
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="1",pp_rank="0",tp_rank="1"} 2.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="2",pp_rank="0",tp_rank="2"} 7.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="3",pp_rank="0",tp_rank="3"} 7.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 10.0
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="1",pp_rank="0",tp_rank="1"} 10.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="2",pp_rank="0",tp_rank="2"} 12.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",moe_ep_rank="3",pp_rank="0",tp_rank="3"} 12.0
`

// sglangPrioritySample is SGLang with priority scheduling: the total under
// priority="", then a series per priority (metrics_collector.py,
// _log_gauge_queue_count).
const sglangPrioritySample = `# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority="",tp_rank="0"} 9.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority="0",tp_rank="0"} 6.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority="10",tp_rank="0"} 3.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority="",tp_rank="0"} 32.0
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority="0",tp_rank="0"} 30.0
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority="10",tp_rank="0"} 2.0
`

// tgiSample is TGI after requests: unlabelled gauges, from
// huggingface/text-generation-inference docs/source/reference/metrics.md,
// served by metrics-exporter-prometheus (router/src/server.rs).
const tgiSample = `# HELP tgi_queue_size Current queue size
# TYPE tgi_queue_size gauge
tgi_queue_size 5
# HELP tgi_batch_current_size Current batch size
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 8
# HELP tgi_request_count Total number of requests
# TYPE tgi_request_count counter
tgi_request_count 311
# HELP tgi_request_queue_duration Request queue duration
# TYPE tgi_request_queue_duration summary
tgi_request_queue_duration{quantile="0.5"} 0.0021
tgi_request_queue_duration_sum 1.73
tgi_request_queue_duration_count 311
`

// tritonTRTLLMSample is Triton with the TensorRT-LLM backend behind an
// ensemble: the backend takes requests from Triton's queue at once, so
// nv_inference_pending_request_count stays 0 while its own queue holds
// them. From triton-inference-server/tensorrtllm_backend README.md,
// "Triton Metrics".
const tritonTRTLLMSample = `# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="ensemble",version="1"} 0
nv_inference_pending_request_count{model="preprocessing",version="1"} 0
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 0
nv_inference_pending_request_count{model="postprocessing",version="1"} 0
# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 6
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="context",version="1"} 2
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 64
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 64
# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.93
`

// tritonTRTLLMWithoutWaitingSample is an older TensorRT-LLM backend, whose
// request metrics have no waiting series (tensorrtllm_backend
// inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc
// before it was added).
const tritonTRTLLMWithoutWaitingSample = `# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 0
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 12
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 256
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 12
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="context",version="1"} 1
`

// tritonVLLMSample is Triton with the vLLM backend and
// REPORT_CUSTOM_METRICS: vLLM's gauges labelled model and version beside
// Triton's own (triton-inference-server/vllm_backend src/utils/metrics.py
// and README.md, "Triton Metrics").
const tritonVLLMSample = `# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="vllm_model",version="1"} 0
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model="vllm_model",version="1"} 12
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model="vllm_model",version="1"} 5
`

// tritonOwnQueueSample is Triton with a backend that leaves requests in
// Triton's scheduler queue (Python, ONNX Runtime): its pending count is the
// queue (triton-inference-server/server docs/user_guide/metrics.md,
// "Pending Request Count").
const tritonOwnQueueSample = `# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="embedder",version="1"} 6
nv_inference_pending_request_count{model="reranker",version="2"} 1
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="embedder",version="1"} 1042
`

// llamaCppSample is llama.cpp's server with --metrics (ggml-org/llama.cpp
// tools/server/README.md, GET /metrics).
const llamaCppSample = `# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.27
`

func TestPodValues(t *testing.T) {
	tests := []struct {
		name         string
		engine       v1alpha1.Engine
		text         string
		want         map[string]float64
		wantReported bool
	}{
		{
			name:   "vLLM sums its data-parallel engines",
			engine: v1alpha1.EngineVLLM, text: vllmSample,
			want: map[string]float64{RequestsWaiting: 7, RequestsRunning: 30}, wantReported: true,
		},
		{
			name:   "vLLM under Ray Serve is read under Ray's prefix, summed over replicas",
			engine: v1alpha1.EngineVLLM, text: rayServeVLLMSample,
			want: map[string]float64{RequestsWaiting: 7, RequestsRunning: 55}, wantReported: true,
		},
		{
			name:   "SGLang with all schedulers counts one tensor rank",
			engine: v1alpha1.EngineSGLang, text: sglangSample,
			want: map[string]float64{RequestsWaiting: 6, RequestsRunning: 21}, wantReported: true,
		},
		{
			name:   "SGLang with data-parallel attention sums its groups, one tensor rank each",
			engine: v1alpha1.EngineSGLang, text: sglangDPAttentionSample,
			want: map[string]float64{RequestsWaiting: 9, RequestsRunning: 22}, wantReported: true,
		},
		{
			name:   "SGLang with priority scheduling counts the totals, not the breakdown",
			engine: v1alpha1.EngineSGLang, text: sglangPrioritySample,
			want: map[string]float64{RequestsWaiting: 9, RequestsRunning: 32}, wantReported: true,
		},
		{
			name:   "TGI",
			engine: v1alpha1.EngineTGI, text: tgiSample,
			want: map[string]float64{RequestsWaiting: 5, RequestsRunning: 8}, wantReported: true,
		},
		{
			name:   "TGI before its first request serves an empty page: idle",
			engine: v1alpha1.EngineTGI, text: "",
			want: map[string]float64{RequestsWaiting: 0, RequestsRunning: 0},
		},
		{
			name:   "TGI's gauge that is NaN is no value, not 0",
			engine: v1alpha1.EngineTGI, text: "tgi_queue_size NaN\ntgi_batch_current_size 2\n",
			want: map[string]float64{RequestsRunning: 2}, wantReported: true,
		},
		{
			name:   "Triton with TensorRT-LLM reads the backend's queue, not Triton's",
			engine: v1alpha1.EngineTriton, text: tritonTRTLLMSample,
			want: map[string]float64{RequestsWaiting: 6, RequestsRunning: 64}, wantReported: true,
		},
		{
			name:   "Triton with an older TensorRT-LLM has no waiting value rather than Triton's 0",
			engine: v1alpha1.EngineTriton, text: tritonTRTLLMWithoutWaitingSample,
			want: map[string]float64{RequestsRunning: 12}, wantReported: true,
		},
		{
			name:   "Triton with vLLM reads vLLM's queue, not Triton's",
			engine: v1alpha1.EngineTriton, text: tritonVLLMSample,
			want: map[string]float64{RequestsWaiting: 5, RequestsRunning: 12}, wantReported: true,
		},
		{
			name:   "Triton's own queue for other backends, without running requests",
			engine: v1alpha1.EngineTriton, text: tritonOwnQueueSample,
			want: map[string]float64{RequestsWaiting: 7}, wantReported: true,
		},
		{
			name:   "llama.cpp",
			engine: v1alpha1.EngineLlamaCpp, text: llamaCppSample,
			want: map[string]float64{RequestsWaiting: 1, RequestsRunning: 4}, wantReported: true,
		},
		{
			name: "an unnamed engine is told from the names",
			text: tgiSample,
			want: map[string]float64{RequestsWaiting: 5, RequestsRunning: 8}, wantReported: true,
		},
		{
			name: "an unnamed Triton with vLLM is told as Triton",
			text: tritonVLLMSample,
			want: map[string]float64{RequestsWaiting: 5, RequestsRunning: 12}, wantReported: true,
		},
		{
			name: "an unnamed vLLM under Ray Serve is told from Ray's names",
			text: rayServeVLLMSample,
			want: map[string]float64{RequestsWaiting: 7, RequestsRunning: 55}, wantReported: true,
		},
		{
			name: "an unnamed engine's empty page tells nothing",
			text: "",
			want: map[string]float64{},
		},
		{
			name:   "a named engine is authoritative: another engine's names count for nothing",
			engine: v1alpha1.EngineSGLang, text: vllmSample,
			want: map[string]float64{},
		},
		{
			name:   "an absent family is no value, not 0",
			engine: v1alpha1.EngineVLLM, text: "vllm:num_requests_running{model_name=\"a\"} 3\n",
			want: map[string]float64{RequestsRunning: 3}, wantReported: true,
		},
		{
			name:   "a family without series is no value",
			engine: v1alpha1.EngineVLLM, text: "# HELP vllm:num_requests_waiting Requests waiting.\n# TYPE vllm:num_requests_waiting gauge\n",
			want: map[string]float64{},
		},
		{
			name:   "a NaN series makes the family no value",
			engine: v1alpha1.EngineVLLM, text: "vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} NaN\n",
			want: map[string]float64{}, wantReported: true,
		},
		{
			name: "nothing known",
			text: "process_cpu_seconds_total 12\n",
			want: map[string]float64{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, err := parser.TextToMetricFamilies(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			got, reported := podValues(tc.engine, families)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("podValues (-want +got):\n%s", diff)
			}
			if reported != tc.wantReported {
				t.Errorf("podValues reported = %t; want %t", reported, tc.wantReported)
			}
		})
	}
}

// TestNamedEngineReadsTheSameAsDetection checks that a Triton Pod with the
// vLLM backend reads the same whether its quota names triton or vllm, or
// it is found from its names.
func TestNamedEngineReadsTheSameAsDetection(t *testing.T) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(tritonVLLMSample))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := podValues("", families)
	for _, e := range []v1alpha1.Engine{v1alpha1.EngineTriton, v1alpha1.EngineVLLM} {
		if got, _ := podValues(e, families); !cmp.Equal(want, got) {
			t.Errorf("podValues(%s) = %v; want %v, as detected", e, got, want)
		}
	}
}

// TestEveryEngineHasWaitingRequests guards the table: an HPA on
// inference_requests_waiting must work whatever the ProviderQuota's engine,
// and every engine must be detectable from a marker of its own.
func TestEveryEngineHasWaitingRequests(t *testing.T) {
	apiEngines := []v1alpha1.Engine{v1alpha1.EngineVLLM, v1alpha1.EngineTGI, v1alpha1.EngineSGLang, v1alpha1.EngineTriton, v1alpha1.EngineLlamaCpp}
	for _, e := range apiEngines {
		rule, ok := ruleOf(e)
		if !ok || len(rule.readings[RequestsWaiting].sources) == 0 {
			t.Errorf("engine %s has no source for %s", e, RequestsWaiting)
		}
		if len(rule.markers) == 0 {
			t.Errorf("engine %s has no marker to be told by", e)
		}
	}
	if len(engineRules) != len(apiEngines) {
		t.Errorf("engineRules has %d engines; want the API's %d", len(engineRules), len(apiEngines))
	}
	markers := map[string]v1alpha1.Engine{}
	for _, rule := range engineRules {
		for _, m := range rule.markers {
			if other, ok := markers[m]; ok {
				t.Errorf("marker %s is both %s's and %s's", m, other, rule.engine)
			}
			markers[m] = rule.engine
		}
	}
}
