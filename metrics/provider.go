package metrics

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider/helpers"

	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

const (
	// DefaultInterval is how often Pods are scraped and gateways polled by
	// default.
	DefaultInterval = 2 * time.Second
	// DefaultTimeout bounds one Pod's scrape by default.
	DefaultTimeout = time.Second
	// DefaultWorkers is how many Pods are scraped at once by default.
	DefaultWorkers = 16
	// DefaultMaxScrapeBytes caps one Pod's /metrics answer by default;
	// vLLM's, histograms included, is a few hundred kilobytes.
	DefaultMaxScrapeBytes = 4 << 20
	// DefaultMaxScrapeSeries caps the series read from one Pod by default;
	// an engine serves a few hundred.
	DefaultMaxScrapeSeries = 20_000
	// staleIntervals is how many intervals a value lives without a newer
	// one.
	staleIntervals = 3
	// LabelProviderQuota labels the external metric's series with the
	// ProviderQuota it counts for.
	LabelProviderQuota = "providerquota"
)

var (
	podsResource   = schema.GroupResource{Resource: "pods"}
	quotasResource = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "providerquotas"}
	// externalResource names the external metrics in not-found errors.
	externalResource = schema.GroupResource{Group: external_metrics.GroupName}
	// served are the metrics of each resource.
	served = map[schema.GroupResource][]string{
		podsResource:   {RequestsWaiting, RequestsRunning, RequestsWaitingPerGPU},
		quotasResource: {QueueDepth, QueuedTokens},
	}
)

// Options configure a Provider. Quotas, Pods and Mapper are required.
type Options struct {
	// Quotas lists the ProviderQuotas in every namespace; in the adapter, an
	// informer cache.
	Quotas client.Reader
	// Pods lists the Pods the ProviderQuotas select, the gateway Pods and
	// those labelled LabelScrape; in the adapter, a PodCache, which holds no
	// other Pod.
	Pods client.Reader
	// Mapper resolves the resources that requests name, ProviderQuotas
	// included; it must be kept fresh as CRDs come and go.
	Mapper apimeta.RESTMapper
	// Gateways are the gateways' queue URLs (…/admin/queues; a usage URL,
	// …/admin/usage, serves too but costs the gateway a store read) by
	// namespace: a namespace's gateways queue the requests for its
	// ProviderQuotas.
	Gateways map[string][]string
	// GatewaySelector selects the gateway Pods, in every namespace, whose
	// admin port serves their queues; each queues the requests for the
	// ProviderQuotas of its own namespace. Nil means none: only Gateways
	// are polled, and without either the queue metrics have no value.
	GatewaySelector labels.Selector
	// GatewayPort is the gateway Pods' admin port.
	GatewayPort int32
	// GatewayAdminTokenFile is the file of the token the gateways' admin
	// endpoints ask for, read at each poll. Empty sends none.
	GatewayAdminTokenFile string
	// GatewayAdminTokenNamespace is the namespace of the gateways the token
	// is theirs: it goes to no gateway elsewhere, since anyone who may make a
	// Pod with the gateways' labels in another namespace would be sent it.
	GatewayAdminTokenNamespace string
	// Interval is the time between scrapes. Zero means DefaultInterval.
	Interval time.Duration
	// Timeout bounds one Pod's scrape and one gateway's answer. Zero means
	// DefaultTimeout; it is cut to Interval if longer.
	Timeout time.Duration
	// Workers is how many Pods are scraped at once. Zero means
	// DefaultWorkers.
	Workers int
	// MaxScrapeBytes caps the bytes read from one Pod: a longer answer gives
	// no value. Zero means DefaultMaxScrapeBytes.
	MaxScrapeBytes int64
	// MaxScrapeSeries caps the series read from one Pod: an answer with
	// more gives no value, and is not parsed. Zero means
	// DefaultMaxScrapeSeries.
	MaxScrapeSeries int
	// AnnotatedNamespaces are the namespaces whose Pods labelled
	// LabelScrape are scraped, as their annotations say. None means every
	// namespace. The Pods a ProviderQuota selects are scraped wherever it
	// is.
	AnnotatedNamespaces []string
	// Transport makes the requests. Nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Clock times the scrapes and ages the values. Nil means the real
	// clock.
	Clock clock.WithTicker
}

// Provider serves the inference Pods' waiting and running requests as
// custom metrics of Pods, and the gateways' queues as custom metrics of
// ProviderQuotas and as an external metric. Run (or Refresh) gathers the
// values; the metrics API reads the last ones. It is safe for concurrent
// use.
type Provider struct {
	quotaReader client.Reader
	podReader   client.Reader
	mapper      apimeta.RESTMapper
	annotatedIn []string // none means every namespace
	interval    time.Duration
	clock       clock.WithTicker
	scraper     *scraper
	gateways    *gateways
	inst        *instruments

	mu     sync.Mutex
	pods   map[types.NamespacedName]sample     // the Pods that reported in the last scrape
	quotas map[types.NamespacedName]labels.Set // every ProviderQuota's labels
}

var (
	_ provider.CustomMetricsProvider   = (*Provider)(nil)
	_ provider.ExternalMetricsProvider = (*Provider)(nil)
)

// New returns a Provider that holds no values until its first Refresh.
func New(opts Options) *Provider {
	interval, timeout := cmpOr(opts.Interval, DefaultInterval), cmpOr(opts.Timeout, DefaultTimeout)
	timeout = min(timeout, interval)
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	transport := opts.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	p := &Provider{
		quotaReader: opts.Quotas,
		podReader:   opts.Pods,
		mapper:      opts.Mapper,
		annotatedIn: opts.AnnotatedNamespaces,
		interval:    interval,
		clock:       clk,
		gateways: &gateways{
			reader:      opts.Pods,
			static:      opts.Gateways,
			selector:    opts.GatewaySelector,
			port:        opts.GatewayPort,
			tokenFile:   opts.GatewayAdminTokenFile,
			tokenFor:    opts.GatewayAdminTokenNamespace,
			client:      &http.Client{Transport: transport, Timeout: timeout},
			byNamespace: map[string]*usage.Poller{},
		},
		pods:   map[types.NamespacedName]sample{},
		quotas: map[types.NamespacedName]labels.Set{},
	}
	p.inst = newInstruments(p.newestAge)
	p.scraper = &scraper{
		client:    &http.Client{Transport: transport},
		workers:   cmpOr(opts.Workers, DefaultWorkers),
		timeout:   timeout,
		maxBytes:  cmpOr(opts.MaxScrapeBytes, DefaultMaxScrapeBytes),
		maxSeries: cmpOr(opts.MaxScrapeSeries, DefaultMaxScrapeSeries),
		clock:     clk,
		inst:      p.inst,
	}
	return p
}

func cmpOr[T comparable](v, fallback T) T {
	var zero T
	if v == zero {
		return fallback
	}
	return v
}

// RegisterMetrics registers the adapter's own metrics (scrape duration,
// scrape errors, the age of the newest value) with a registry's Register
// and CustomRegister, such as legacyregistry.Register and
// legacyregistry.CustomRegister.
func (p *Provider) RegisterMetrics(register func(basemetrics.Registerable) error, customRegister func(basemetrics.StableCollector) error) error {
	return p.inst.register(register, customRegister)
}

// Run refreshes the values at once and then every interval, until ctx is
// done.
func (p *Provider) Run(ctx context.Context) {
	ticker := p.clock.NewTicker(p.interval)
	defer ticker.Stop()
	for {
		p.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Refresh lists the Pods to scrape, scrapes them and polls the gateways,
// all at once, and keeps what answered. A Pod that did not answer loses its
// value. If the Pods cannot be listed, the values stay until they are stale.
func (p *Provider) Refresh(ctx context.Context) {
	log := klog.FromContext(ctx)
	pollers, err := p.gateways.pollers(ctx)
	if err != nil {
		log.Error(err, "Cannot find the gateways; those found before are polled")
	}
	var wg sync.WaitGroup
	for _, poller := range pollers {
		// The poller logs through controller-runtime, which reads the
		// logger from the context.
		wg.Go(func() { poller.Poll(klog.NewContext(ctx, log)) })
	}
	defer wg.Wait()
	targets, err := p.targets(ctx)
	if err != nil {
		log.Error(err, "Cannot list the Pods to scrape; the values stay until they are stale")
		return
	}
	p.keep(log, p.scraper.all(ctx, targets))
}

// targets lists the Pods to scrape, and remembers the ProviderQuotas'
// labels for selectors.
func (p *Provider) targets(ctx context.Context) ([]Target, error) {
	ctx, cancel := context.WithTimeout(ctx, p.interval)
	defer cancel()
	var pods corev1.PodList
	if err := p.podReader.List(ctx, &pods); err != nil {
		return nil, err
	}
	// Without the ProviderQuota CRD (not installed yet) only labelled Pods
	// are scraped.
	var quotas v1alpha1.ProviderQuotaList
	if err := p.quotaReader.List(ctx, &quotas); err != nil && !apimeta.IsNoMatchError(err) {
		return nil, err
	}
	targets, errs := Targets(quotas.Items, pods.Items, p.annotatedIn)
	if len(errs) > 0 {
		klog.FromContext(ctx).V(2).Info("Some Pods cannot be scraped", "reasons", errors.Join(errs...).Error())
	}
	quotaLabels := map[types.NamespacedName]labels.Set{}
	for _, q := range quotas.Items {
		quotaLabels[types.NamespacedName{Namespace: q.Namespace, Name: q.Name}] = labels.Set(q.Labels)
	}
	p.mu.Lock()
	p.quotas = quotaLabels
	p.mu.Unlock()
	return targets, nil
}

// keep replaces the Pods' values with those of samples, leaving out the
// Pods that failed, and logs the Pods that stop or start reporting.
func (p *Provider) keep(log klog.Logger, samples []sample) {
	pods := make(map[types.NamespacedName]sample, len(samples))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range samples {
		_, had := p.pods[s.target.Pod]
		switch {
		case s.err == nil:
			pods[s.target.Pod] = s
			if !had {
				log.V(1).Info("Pod reports", "pod", s.target.Pod, "url", s.target.URL)
			}
			if s.skipped != nil {
				log.V(2).Info("Skipped lines of a Pod's metrics that do not parse", "pod", s.target.Pod, "reasons", s.skipped.Error())
			}
		case had:
			log.Info("Pod stopped reporting; it has no value until it does", "pod", s.target.Pod, "url", s.target.URL, "err", s.err.Error())
		}
	}
	p.pods = pods
}

// fresh reports whether a value taken at t may still be served.
func (p *Provider) fresh(t time.Time) bool {
	return p.clock.Since(t) <= staleIntervals*p.interval
}

// newestAge returns the age, in seconds, of the newest Pod value held, and
// false if there is none.
func (p *Provider) newestAge() (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var newest time.Time
	for _, s := range p.pods {
		if s.at.After(newest) {
			newest = s.at
		}
	}
	if newest.IsZero() {
		return 0, false
	}
	return p.clock.Since(newest).Seconds(), true
}

// value is one metric's value for one object.
type value struct {
	name string
	v    float64
	at   time.Time
}

// podValue returns a Pod's fresh value of metric.
func (p *Provider) podValue(pod types.NamespacedName, metric string) (value, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.pods[pod]
	v, has := s.values[metric]
	if !ok || !has || !p.fresh(s.at) {
		return value{}, false
	}
	return value{name: pod.Name, v: v, at: s.at}, true
}

// podValues returns the fresh values of metric of a namespace's Pods that
// match selector, by Pod name.
func (p *Provider) podValues(namespace string, selector labels.Selector, metric string) []value {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []value
	for pod, s := range p.pods {
		v, has := s.values[metric]
		if pod.Namespace == namespace && has && p.fresh(s.at) && selector.Matches(s.target.Labels) {
			out = append(out, value{name: pod.Name, v: v, at: s.at})
		}
	}
	slices.SortFunc(out, func(a, b value) int { return strings.Compare(a.name, b.name) })
	return out
}

// queued returns a queue metric of each of a namespace's ProviderQuotas, by
// name, if every gateway snapshot counted is fresh.
func (p *Provider) queued(namespace, metric string) []value {
	field := queueMetrics[metric]
	totals := p.gateways.totals(namespace)
	if field == nil || totals == nil || totals.Oldest.IsZero() || !p.fresh(totals.Oldest) {
		return nil
	}
	var out []value
	for name, u := range totals.Providers {
		out = append(out, value{name: name, v: float64(field(u)), at: totals.Oldest})
	}
	slices.SortFunc(out, func(a, b value) int { return strings.Compare(a.name, b.name) })
	return out
}

// quotaValue returns a queue metric of one ProviderQuota.
func (p *Provider) quotaValue(name types.NamespacedName, metric string) (value, bool) {
	values := p.queued(name.Namespace, metric)
	i := slices.IndexFunc(values, func(v value) bool { return v.name == name.Name })
	if i < 0 {
		return value{}, false
	}
	return values[i], true
}

// quotaValues returns a queue metric of a namespace's ProviderQuotas that
// match selector.
func (p *Provider) quotaValues(namespace string, selector labels.Selector, metric string) []value {
	p.mu.Lock()
	quotas := p.quotas
	p.mu.Unlock()
	return slices.DeleteFunc(p.queued(namespace, metric), func(v value) bool {
		set, ok := quotas[types.NamespacedName{Namespace: namespace, Name: v.name}]
		return !ok || !selector.Matches(set)
	})
}

// GetMetricByName returns a metric of one Pod or ProviderQuota, or a
// not-found error if it has no fresh value.
func (p *Provider) GetMetricByName(_ context.Context, name types.NamespacedName, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	info, err := p.normalize(info, metricSelector)
	if err != nil {
		return nil, err
	}
	var v value
	var ok bool
	if info.GroupResource == podsResource {
		v, ok = p.podValue(name, info.Metric)
	} else {
		v, ok = p.quotaValue(name, info.Metric)
	}
	if !ok {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	values, err := p.metricValues(name.Namespace, info, []value{v})
	if err != nil {
		return nil, err
	}
	return &values.Items[0], nil
}

// GetMetricBySelector returns a metric of the Pods or ProviderQuotas of a
// namespace that match selector and have a fresh value; the others are left
// out.
func (p *Provider) GetMetricBySelector(_ context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	info, err := p.normalize(info, metricSelector)
	if err != nil {
		return nil, err
	}
	var values []value
	if info.GroupResource == podsResource {
		values = p.podValues(namespace, selector, info.Metric)
	} else {
		values = p.quotaValues(namespace, selector, info.Metric)
	}
	return p.metricValues(namespace, info, values)
}

// normalize resolves the resource a request names, and checks that this
// provider serves the metric for it. Every series here is unlabelled, so a
// metric selector that needs a label matches nothing.
func (p *Provider) normalize(info provider.CustomMetricInfo, metricSelector labels.Selector) (provider.CustomMetricInfo, error) {
	asked := info.GroupResource
	info, _, err := info.Normalized(p.mapper)
	if err != nil || !info.Namespaced || !slices.Contains(served[info.GroupResource], info.Metric) {
		return info, provider.NewMetricNotFoundError(asked, info.Metric)
	}
	if !metricSelector.Matches(labels.Set{}) {
		return info, provider.NewMetricNotFoundForSelectorError(info.GroupResource, info.Metric, "*", metricSelector)
	}
	return info, nil
}

// metricValues builds the API's values for objects of one namespace.
func (p *Provider) metricValues(namespace string, info provider.CustomMetricInfo, values []value) (*custom_metrics.MetricValueList, error) {
	list := &custom_metrics.MetricValueList{Items: make([]custom_metrics.MetricValue, 0, len(values))}
	for _, v := range values {
		ref, err := helpers.ReferenceFor(p.mapper, types.NamespacedName{Namespace: namespace, Name: v.name}, info)
		if err != nil {
			klog.ErrorS(err, "Cannot name the kind of a metric's object", "resource", info.GroupResource)
			return nil, provider.NewMetricNotFoundError(info.GroupResource, info.Metric)
		}
		list.Items = append(list.Items, custom_metrics.MetricValue{
			DescribedObject: ref,
			Metric:          custom_metrics.MetricIdentifier{Name: info.Metric},
			Timestamp:       metav1.NewTime(v.at),
			Value:           quantity(v.v),
		})
	}
	return list, nil
}

// ListAllMetrics lists the metrics served for Pods and ProviderQuotas.
func (p *Provider) ListAllMetrics() []provider.CustomMetricInfo {
	var out []provider.CustomMetricInfo
	for _, gr := range []schema.GroupResource{podsResource, quotasResource} {
		for _, m := range served[gr] {
			out = append(out, provider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: m})
		}
	}
	return out
}

// GetExternalMetric returns a queue metric of each ProviderQuota of the
// namespace, labelled providerquota=<name>, that metricSelector matches.
func (p *Provider) GetExternalMetric(_ context.Context, namespace string, metricSelector labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if queueMetrics[info.Metric] == nil {
		return nil, provider.NewMetricNotFoundError(externalResource, info.Metric)
	}
	list := &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{}}
	for _, v := range p.queued(namespace, info.Metric) {
		set := labels.Set{LabelProviderQuota: v.name}
		if !metricSelector.Matches(set) {
			continue
		}
		list.Items = append(list.Items, external_metrics.ExternalMetricValue{
			MetricName:   info.Metric,
			MetricLabels: set,
			Timestamp:    metav1.NewTime(v.at),
			Value:        quantity(v.v),
		})
	}
	return list, nil
}

// ListAllExternalMetrics lists the queue metrics.
func (p *Provider) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	return []provider.ExternalMetricInfo{{Metric: QueueDepth}, {Metric: QueuedTokens}}
}

// quantity holds v to the thousandth, which an average per Pod needs.
func quantity(v float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI)
}
