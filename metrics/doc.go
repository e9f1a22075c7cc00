// Package metrics is the custom metrics adapter's provider: it serves
// custom.metrics.k8s.io and external.metrics.k8s.io (through
// sigs.k8s.io/custom-metrics-apiserver) so a HorizontalPodAutoscaler can
// scale inference Pods on the requests waiting in them, and on the requests
// queued in the gateways before they reach a Pod.
//
// The adapter needs no Prometheus. Every interval (2 s by default) it scrapes
// each inference Pod's /metrics itself, concurrently, through a bounded pool
// of workers and with a timeout per Pod, parses the Prometheus text format
// with github.com/prometheus/common/expfmt, and maps each engine's own names
// to one vocabulary:
//
//	metric                               resource                   from
//	inference_requests_waiting           pods                       the engine's waiting requests
//	inference_requests_running           pods                       the engine's running requests
//	inference_requests_waiting_per_gpu   pods                       waiting / the ProviderQuota's gpusPerPod
//	sluice_queue_depth                   providerquotas.sluice.dev  requests queued in the gateways (/admin/queues)
//	sluice_queued_tokens                 providerquotas.sluice.dev  their estimated tokens
//
// sluice_queue_depth and sluice_queued_tokens are also external metrics,
// labelled providerquota=<name>, for an HPA that scales a workload it does
// not describe, from zero replicas included. The gateways are found by a
// label selector on their Pods, in every namespace (each queues for the
// ProviderQuotas of its own namespace), or given by URL.
//
// The Pods scraped are those that each self-hosted ProviderQuota selects, on
// its port, plus any Pod labelled sluice.dev/scrape: "true" and annotated
// sluice.dev/port (and optionally sluice.dev/path and sluice.dev/engine), in
// the namespaces Options.AnnotatedNamespaces lists, or any. One scrape reads
// at most Options.MaxScrapeBytes and MaxScrapeSeries; a Pod that serves more
// gives no value. A PodCache holds only those Pods and the gateways, each
// trimmed by TrimPod: the API server selects them by label, so it never
// sends the adapter the cluster's other Pods. Earlier versions read the
// annotation sluice.dev/scrape; PodCache.Run names, once, the Pods that
// have it without the label.
//
// The engine a quota or annotation names decides which names are read; a
// Pod that names none is told by names only its engine serves. engineRules
// holds each engine's names, with where they come from: Triton read through
// its TensorRT-LLM or vLLM backend, vLLM under Ray Serve, SGLang counted
// once per tensor-parallel group, and TGI idle before its first request.
//
// A line that the text parser refuses (an exemplar, a -nan) is skipped and
// counted, and the rest of the page is read.
//
// A Pod that fails to report, or whose last value is older than three
// intervals, has no value: it is left out of lists and not found by name,
// never served as 0, so the HPA does not mistake a broken Pod for an idle
// one.
package metrics
