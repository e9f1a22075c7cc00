package inference

import "github.com/prometheus/client_golang/prometheus"

// Engine is an inference engine whose metric names the server uses.
type Engine string

// The engines the server can pass for.
const (
	// VLLM is vLLM.
	VLLM Engine = "vllm"
	// TGI is Hugging Face's Text Generation Inference.
	TGI Engine = "tgi"
	// SGLang is SGLang.
	SGLang Engine = "sglang"
	// LlamaCpp is llama.cpp's server.
	LlamaCpp Engine = "llamacpp"
)

// metricNames are an engine's names for the gauges of a Load. An empty name
// is a gauge the engine does not have.
type metricNames struct {
	waiting, running, kvCache string
	// modelLabel is whether the engine labels its gauges with model_name.
	modelLabel bool
}

// engines is the one table of engines and the names of their gauges.
var engines = map[Engine]metricNames{
	VLLM:     {waiting: "vllm:num_requests_waiting", running: "vllm:num_requests_running", kvCache: "vllm:kv_cache_usage_perc", modelLabel: true},
	TGI:      {waiting: "tgi_queue_size", running: "tgi_batch_current_size"},
	SGLang:   {waiting: "sglang:num_queue_reqs", running: "sglang:num_running_reqs", kvCache: "sglang:token_usage", modelLabel: true},
	LlamaCpp: {waiting: "llamacpp:requests_deferred", running: "llamacpp:requests_processing", kvCache: "llamacpp:kv_cache_usage_ratio"},
}

// gauge is one gauge of a Load under an engine's name.
type gauge struct {
	desc  *prometheus.Desc
	value func(Load) float64
}

// collector exports a server's Load at each scrape under its engine's
// names.
type collector struct {
	load   func() Load
	gauges []gauge
	labels []string // the label values: the model, or none
}

var _ prometheus.Collector = (*collector)(nil)

func newCollector(o Options, load func() Load) *collector {
	names := engines[o.Engine]
	c := &collector{load: load}
	var labelNames []string
	if names.modelLabel {
		labelNames, c.labels = []string{"model_name"}, []string{o.Model}
	}
	add := func(name, help string, value func(Load) float64) {
		if name != "" {
			c.gauges = append(c.gauges, gauge{prometheus.NewDesc(name, help, labelNames, nil), value})
		}
	}
	add(names.waiting, "Requests waiting to be processed.", func(l Load) float64 { return float64(l.Waiting) })
	add(names.running, "Requests in the running batch.", func(l Load) float64 { return float64(l.Running) })
	add(names.kvCache, "KV-cache usage: 1 means 100 percent.", Load.KVCacheUsage)
	return c
}

// Describe sends the gauges' descriptions.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range c.gauges {
		ch <- g.desc
	}
}

// Collect sends the gauges' values now.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	l := c.load()
	for _, g := range c.gauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(l), c.labels...)
	}
}
