package metrics

import (
	"math"
	"slices"
	"strconv"
	"strings"

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

// source is one place where an engine may report a metric: a family, and
// which of its series count. The zero value of each option counts every
// series.
type source struct {
	// family names the metric family.
	family string
	// label, when set, counts only the series whose label has value; a
	// series without the label has the value "".
	label, value string
	// ranks name labels that tell apart workers which each report the same
	// value, such as SGLang's schedulers, one per tensor-parallel rank. Of
	// the series that differ only in these labels, the one whose first
	// rank label is lowest counts, and the others not.
	ranks []string
}

// reading is how an engine reports one metric.
type reading struct {
	// sources are where the metric may be, in order of preference: the
	// first whose family is present is read and the others are not, so one
	// Pod is never counted twice.
	sources []source
	// zeroWhenAbsent reads the metric as 0 when no source is present in a
	// page that parsed: the engine creates the gauge on its first request,
	// so a Pod that never had one reports nothing at all.
	zeroWhenAbsent bool
}

// engineRule is how one engine reports the metrics read from its Pods.
type engineRule struct {
	engine v1alpha1.Engine
	// markers are families that only this engine serves: any of them
	// present tells the engine of a Pod that does not name it.
	markers []string
	// readings are the engine's readings by metric. A metric the engine
	// lacks is absent, and its Pods have no value for it.
	readings map[string]reading
}

// engineRules is the one table of how each engine reports, in the order in
// which a Pod's engine is told from its metrics when the Pod does not name
// it. Triton comes before vLLM because Triton's vLLM backend serves vLLM's
// names beside Triton's.
//
// Where the names come from:
//   - Triton: nv_inference_pending_request_count is Triton's own queue
//     (triton-inference-server/server docs/user_guide/metrics.md). The
//     TensorRT-LLM and vLLM backends take every request from that queue at
//     once and queue it themselves, so it stays 0 under load; their own
//     counts are read instead: nv_trt_llm_request_metrics, labelled
//     request_type (triton-inference-server/tensorrtllm_backend README.md,
//     "Triton Metrics"; inflight_batcher_llm custom_metrics_reporter.cc),
//     and vllm:num_requests_waiting and vllm:num_requests_running, labelled
//     model and version (triton-inference-server/vllm_backend
//     src/utils/metrics.py).
//   - vLLM: vllm:num_requests_waiting and vllm:num_requests_running,
//     labelled model_name, and engine under data parallelism (docs.vllm.ai,
//     "Production Metrics"). Under Ray Serve, Ray's metrics agent serves
//     them as ray_vllm_num_requests_waiting and
//     ray_vllm_num_requests_running, with Ray's labels such as WorkerId
//     (ray-project/ray python/ray/dashboard/modules/metrics/dashboards/
//     serve_llm_dashboard_panels.py).
//   - SGLang: sglang:num_queue_reqs and sglang:num_running_reqs, labelled
//     model_name, engine_type, tp_rank, pp_rank, moe_ep_rank, and dp_rank
//     under data parallelism (sgl-project/sglang
//     python/sglang/srt/observability/metrics_collector.py). Only tensor
//     rank 0 reports unless --enable-metrics-for-all-schedulers, which
//     repeats the count on every tensor rank. With priority scheduling the
//     total is the series labelled priority="" and the others break it
//     down.
//   - TGI: tgi_queue_size and tgi_batch_current_size, unlabelled
//     (huggingface/text-generation-inference docs/source/reference/
//     metrics.md). The router creates them on its first request
//     (backends/v3/src/queue.rs, backend.rs), so before it they are absent
//     and may leave the page empty.
//   - llama.cpp: llamacpp:requests_deferred and
//     llamacpp:requests_processing (ggml-org/llama.cpp tools/server
//     README.md, /metrics).
var engineRules = []engineRule{
	{
		engine:  v1alpha1.EngineTriton,
		markers: []string{tritonTRTLLMRequests, tritonPending},
		readings: map[string]reading{
			RequestsWaiting: {sources: []source{
				{family: tritonTRTLLMRequests, label: "request_type", value: "waiting"},
				{family: vllmWaiting},
				{family: tritonPending},
			}},
			RequestsRunning: {sources: []source{
				{family: tritonTRTLLMRequests, label: "request_type", value: "active"},
				{family: vllmRunning},
			}},
		},
	},
	{
		engine:  v1alpha1.EngineSGLang,
		markers: []string{sglangWaiting, sglangRunning},
		readings: map[string]reading{
			RequestsWaiting: {sources: []source{sglangSource(sglangWaiting)}},
			RequestsRunning: {sources: []source{sglangSource(sglangRunning)}},
		},
	},
	{
		engine:  v1alpha1.EngineTGI,
		markers: []string{tgiWaiting, tgiRunning},
		readings: map[string]reading{
			RequestsWaiting: {sources: []source{{family: tgiWaiting}}, zeroWhenAbsent: true},
			RequestsRunning: {sources: []source{{family: tgiRunning}}, zeroWhenAbsent: true},
		},
	},
	{
		engine:  v1alpha1.EngineLlamaCpp,
		markers: []string{llamaCppWaiting, llamaCppRunning},
		readings: map[string]reading{
			RequestsWaiting: {sources: []source{{family: llamaCppWaiting}}},
			RequestsRunning: {sources: []source{{family: llamaCppRunning}}},
		},
	},
	{
		engine:  v1alpha1.EngineVLLM,
		markers: []string{vllmWaiting, vllmRunning, rayVLLMWaiting, rayVLLMRunning},
		readings: map[string]reading{
			RequestsWaiting: {sources: []source{{family: vllmWaiting}, {family: rayVLLMWaiting}}},
			RequestsRunning: {sources: []source{{family: vllmRunning}, {family: rayVLLMRunning}}},
		},
	},
}

// The engines' own names, as engineRules reads them.
const (
	vllmWaiting          = "vllm:num_requests_waiting"
	vllmRunning          = "vllm:num_requests_running"
	rayVLLMWaiting       = "ray_vllm_num_requests_waiting"
	rayVLLMRunning       = "ray_vllm_num_requests_running"
	tgiWaiting           = "tgi_queue_size"
	tgiRunning           = "tgi_batch_current_size"
	sglangWaiting        = "sglang:num_queue_reqs"
	sglangRunning        = "sglang:num_running_reqs"
	tritonPending        = "nv_inference_pending_request_count"
	tritonTRTLLMRequests = "nv_trt_llm_request_metrics"
	llamaCppWaiting      = "llamacpp:requests_deferred"
	llamaCppRunning      = "llamacpp:requests_processing"
)

// sglangSource reads an SGLang gauge once per scheduler group: the totals
// (priority=""), of the lowest tensor rank.
func sglangSource(family string) source {
	return source{family: family, label: "priority", value: "", ranks: []string{"tp_rank", "moe_ep_rank"}}
}

// knownEngine reports whether the adapter knows how engine reports.
func knownEngine(engine v1alpha1.Engine) bool {
	_, ok := ruleOf(engine)
	return ok
}

func ruleOf(engine v1alpha1.Engine) (engineRule, bool) {
	i := slices.IndexFunc(engineRules, func(r engineRule) bool { return r.engine == engine })
	if i < 0 {
		return engineRule{}, false
	}
	return engineRules[i], true
}

// podValues reads the vocabulary's metrics from one Pod's metric families,
// each summed over the series that count (an engine may label them by
// model, or by worker). A named engine is authoritative; an empty one means
// the first engine of engineRules with any of its markers present. A metric
// without a source present, or whose series hold no finite value, is left
// out: it is never read as 0, unless its reading says so. reported is
// whether any source of the engine was present.
func podValues(engine v1alpha1.Engine, families map[string]*dto.MetricFamily) (values map[string]float64, reported bool) {
	rule, ok := ruleOf(engine)
	if engine == "" {
		rule, ok = detectRule(families)
	}
	values = map[string]float64{}
	if !ok {
		return values, false
	}
	for metric, r := range rule.readings {
		v, present, ok := r.read(families)
		if ok {
			values[metric] = v
		}
		reported = reported || present
	}
	return values, reported
}

// detectRule returns the rule of the first engine whose markers appear in
// families.
func detectRule(families map[string]*dto.MetricFamily) (engineRule, bool) {
	for _, rule := range engineRules {
		for _, name := range rule.markers {
			if _, ok := families[name]; ok {
				return rule, true
			}
		}
	}
	return engineRule{}, false
}

// read returns the metric from the first source present in families, and
// whether a source was present at all.
func (r reading) read(families map[string]*dto.MetricFamily) (v float64, present, ok bool) {
	for _, s := range r.sources {
		if f, has := families[s.family]; has {
			v, ok := s.sum(f)
			return v, true, ok
		}
	}
	return 0, false, r.zeroWhenAbsent
}

// sum adds up the values of the series of f that count. It reports false
// when no series counts, or a value is not finite.
func (s source) sum(f *dto.MetricFamily) (float64, bool) {
	series := s.counted(f.GetMetric())
	if len(series) == 0 {
		return 0, false
	}
	var total float64
	for _, m := range series {
		v, ok := seriesValue(m)
		if !ok {
			return 0, false
		}
		total += v
	}
	return total, true
}

// counted returns the series that match s.label, less the repeats of
// s.ranks.
func (s source) counted(series []*dto.Metric) []*dto.Metric {
	if s.label != "" {
		series = slices.DeleteFunc(slices.Clone(series), func(m *dto.Metric) bool { return labelValue(m, s.label) != s.value })
	}
	if len(s.ranks) == 0 {
		return series
	}
	return lowestRanks(series, s.ranks)
}

// lowestRanks keeps, of the series whose labels differ only in ranks, the
// one whose first rank label is lowest, in the order the groups appear.
func lowestRanks(series []*dto.Metric, ranks []string) []*dto.Metric {
	lowest := map[string]int{} // group key -> index in out
	var out []*dto.Metric
	for _, m := range series {
		key := labelsWithout(m, ranks)
		i, seen := lowest[key]
		switch {
		case !seen:
			lowest[key] = len(out)
			out = append(out, m)
		case rank(m, ranks[0]) < rank(out[i], ranks[0]):
			out[i] = m
		}
	}
	return out
}

// labelsWithout identifies a series by its labels other than names.
func labelsWithout(m *dto.Metric, names []string) string {
	var pairs []string
	for _, l := range m.GetLabel() {
		if !slices.Contains(names, l.GetName()) {
			pairs = append(pairs, l.GetName()+"\xff"+l.GetValue())
		}
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "\xfe")
}

// rank reads a rank label as a number; one that is not a number sorts last.
func rank(m *dto.Metric, name string) int {
	n, err := strconv.Atoi(labelValue(m, name))
	if err != nil {
		return math.MaxInt
	}
	return n
}

// labelValue returns the value of a series' label, "" if it has none.
func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// seriesValue returns a series' gauge, counter or untyped value, and false if it
// has none or it is not finite.
func seriesValue(m *dto.Metric) (float64, bool) {
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
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}
