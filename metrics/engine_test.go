package metrics

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

func TestPodValues(t *testing.T) {
	tests := []struct {
		name   string
		engine v1alpha1.Engine
		text   string
		want   map[string]float64
	}{
		{
			name:   "vLLM sums its series over models",
			engine: v1alpha1.EngineVLLM,
			text: `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 3
vllm:num_requests_waiting{model_name="b"} 4
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 16
vllm:num_requests_running{model_name="b"} 2
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="a"} 0.5
`,
			want: map[string]float64{RequestsWaiting: 7, RequestsRunning: 18},
		},
		{
			name:   "TGI",
			engine: v1alpha1.EngineTGI,
			text:   "# TYPE tgi_queue_size gauge\ntgi_queue_size 5\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 8\n",
			want:   map[string]float64{RequestsWaiting: 5, RequestsRunning: 8},
		},
		{
			name:   "SGLang",
			engine: v1alpha1.EngineSGLang,
			text:   "sglang:num_queue_reqs{model_name=\"m\"} 2\nsglang:num_running_reqs{model_name=\"m\"} 9\n",
			want:   map[string]float64{RequestsWaiting: 2, RequestsRunning: 9},
		},
		{
			name:   "Triton has no running requests",
			engine: v1alpha1.EngineTriton,
			text:   "# TYPE nv_inference_pending_request_count gauge\nnv_inference_pending_request_count{model=\"a\",version=\"1\"} 6\nnv_inference_pending_request_count{model=\"b\",version=\"1\"} 1\n",
			want:   map[string]float64{RequestsWaiting: 7},
		},
		{
			name:   "llama.cpp",
			engine: v1alpha1.EngineLlamaCpp,
			text:   "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 1\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 4\n",
			want:   map[string]float64{RequestsWaiting: 1, RequestsRunning: 4},
		},
		{
			name: "an unnamed engine is told from the names",
			text: "tgi_queue_size 5\ntgi_batch_current_size 8\n",
			want: map[string]float64{RequestsWaiting: 5, RequestsRunning: 8},
		},
		{
			name:   "another engine's names count for nothing",
			engine: v1alpha1.EngineVLLM,
			text:   "tgi_queue_size 5\n",
			want:   map[string]float64{},
		},
		{
			name:   "an absent family is no value, not 0",
			engine: v1alpha1.EngineVLLM,
			text:   "vllm:num_requests_running{model_name=\"a\"} 3\n",
			want:   map[string]float64{RequestsRunning: 3},
		},
		{
			name:   "a family without series is no value",
			engine: v1alpha1.EngineVLLM,
			text:   "# HELP vllm:num_requests_waiting Requests waiting.\n# TYPE vllm:num_requests_waiting gauge\n",
			want:   map[string]float64{},
		},
		{
			name:   "NaN is no value",
			engine: v1alpha1.EngineTGI,
			text:   "tgi_queue_size NaN\ntgi_batch_current_size 2\n",
			want:   map[string]float64{RequestsRunning: 2},
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
			if diff := cmp.Diff(tc.want, podValues(tc.engine, families)); diff != "" {
				t.Errorf("podValues (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryEngineHasWaitingRequests guards the table: an HPA on
// inference_requests_waiting must work whatever the ProviderQuota's engine.
func TestEveryEngineHasWaitingRequests(t *testing.T) {
	for _, e := range []v1alpha1.Engine{v1alpha1.EngineVLLM, v1alpha1.EngineTGI, v1alpha1.EngineSGLang, v1alpha1.EngineTriton, v1alpha1.EngineLlamaCpp} {
		if engineNames[e][RequestsWaiting] == "" {
			t.Errorf("engine %s has no name for %s", e, RequestsWaiting)
		}
	}
	if len(engineNames) != 5 {
		t.Errorf("engineNames has %d engines; want the API's 5", len(engineNames))
	}
}
