package metrics

import (
	"maps"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

// The metrics the adapter serves, in one vocabulary whatever the engine.
const (
	// RequestsWaiting is a Pod's requests waiting for a place in its batch.
	RequestsWaiting = "inference_requests_waiting"
	// RequestsRunning is a Pod's requests in its running batch.
	RequestsRunning = "inference_requests_running"
	// RequestsWaitingPerGPU is RequestsWaiting divided by the GPUs of the
	// Pod, for Pods that a ProviderQuota selects.
	RequestsWaitingPerGPU = "inference_requests_waiting_per_gpu"
	// QueueDepth is the requests for a ProviderQuota waiting in the
	// gateways, summed over the gateways.
	QueueDepth = "sluice_queue_depth"
	// QueuedTokens is the estimated tokens of the requests for a
	// ProviderQuota waiting in the gateways, summed over the gateways.
	QueuedTokens = "sluice_queued_tokens"
)

// queueMetrics are the metrics read from the gateways' usage, each with its
// field of a provider's usage.
var queueMetrics = map[string]func(v1alpha1.ProviderUsage) int64{
	QueueDepth:   func(u v1alpha1.ProviderUsage) int64 { return u.Queued },
	QueuedTokens: func(u v1alpha1.ProviderUsage) int64 { return u.QueuedTokens },
}

// engineNames is the one table of each engine's own names for the metrics
// read from its Pods. A metric an engine lacks is absent from its row, and
// such Pods have no value for it.
var engineNames = map[v1alpha1.Engine]map[string]string{
	v1alpha1.EngineVLLM:     {RequestsWaiting: "vllm:num_requests_waiting", RequestsRunning: "vllm:num_requests_running"},
	v1alpha1.EngineTGI:      {RequestsWaiting: "tgi_queue_size", RequestsRunning: "tgi_batch_current_size"},
	v1alpha1.EngineSGLang:   {RequestsWaiting: "sglang:num_queue_reqs", RequestsRunning: "sglang:num_running_reqs"},
	v1alpha1.EngineTriton:   {RequestsWaiting: "nv_inference_pending_request_count"},
	v1alpha1.EngineLlamaCpp: {RequestsWaiting: "llamacpp:requests_deferred", RequestsRunning: "llamacpp:requests_processing"},
}

// engines lists the engines of engineNames in a fixed order, for Pods whose
// engine is found from their metrics.
var engines = slices.Sorted(maps.Keys(engineNames))

// podValues reads the vocabulary's metrics from one Pod's metric families,
// each summed over the Pod's series (an engine may label them by model). An
// empty engine means the first engine with any of its names present. A
// metric whose family is absent, has no series, or holds no finite value is
// left out: it is never read as 0.
func podValues(engine v1alpha1.Engine, families map[string]*dto.MetricFamily) map[string]float64 {
	if engine == "" {
		engine = detectEngine(families)
	}
	values := map[string]float64{}
	for metric, name := range engineNames[engine] {
		if v, ok := sum(families[name]); ok {
			values[metric] = v
		}
	}
	return values
}

// detectEngine returns the first engine whose names appear in families, or
// "" if none does.
func detectEngine(families map[string]*dto.MetricFamily) v1alpha1.Engine {
	for _, e := range engines {
		for _, name := range engineNames[e] {
			if _, ok := families[name]; ok {
				return e
			}
		}
	}
	return ""
}

// sum adds up the gauge, counter or untyped values of a family's series. It
// reports false when there is nothing to add, or a value is not finite.
func sum(f *dto.MetricFamily) (float64, bool) {
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, false
	}
	var total float64
	for _, m := range f.GetMetric() {
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.GetGauge().GetValue()
		case m.Counter != nil:
			v = m.GetCounter().GetValue()
		case m.Untyped != nil:
			v = m.GetUntyped().GetValue()
		default:
			return 0, false
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		total += v
	}
	return total, true
}
