// Command metrics-adapter serves custom.metrics.k8s.io and
// external.metrics.k8s.io so HorizontalPodAutoscalers can scale inference
// Pods on the requests waiting in them, read from the Pods' own /metrics,
// and on the requests queued in the gateways.
//
//	metrics-adapter --secure-port=6443 --gateway-selector=app.kubernetes.io/name=sluice-gateway
//
// The gateways are found by --gateway-selector, in every namespace, and
// polled on --gateway-admin-port; --gateway-usage adds gateways by URL.
//
// It watches only the Pods it can use: those the self-hosted ProviderQuotas
// select, the gateways, and those labelled sluice.dev/scrape=true.
//
// It serves TLS with authentication and authorization delegated to the API
// server, as sigs.k8s.io/custom-metrics-apiserver provides. It is wiring
// only; the work is in package metrics.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	apimetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/dynamicmapper"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/metrics"
)

// adapter is the API server with Sluice's flags.
type adapter struct {
	basecmd.AdapterBase
	opts            metrics.Options
	gateways        []string // NAMESPACE=URL
	gatewaySelector string
	gatewayPort     int
}

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	a := &adapter{}
	a.Name = "sluice-metrics-adapter"
	a.DiscoveryInterval = time.Minute // the flag's default
	fs := a.Flags()
	a.addFlags(fs)
	logs.AddFlags(fs)
	if err := fs.Parse(os.Args); err != nil {
		klog.Fatalf("metrics-adapter: %v", err)
	}
	if err := a.run(genericapiserver.SetupSignalContext()); err != nil {
		klog.Fatalf("metrics-adapter: %v", err)
	}
}

// addFlags defines Sluice's own flags on fs, each setting its field of a.
func (a *adapter) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&a.opts.Interval, "scrape-interval", metrics.DefaultInterval, "time between scrapes of the Pods' /metrics and polls of the gateways")
	fs.DurationVar(&a.opts.Timeout, "scrape-timeout", metrics.DefaultTimeout, "time one Pod or gateway has to answer")
	fs.IntVar(&a.opts.Workers, "scrape-workers", metrics.DefaultWorkers, "Pods scraped at once")
	fs.Int64Var(&a.opts.MaxScrapeBytes, "scrape-max-bytes", metrics.DefaultMaxScrapeBytes, "the most bytes read from one Pod's /metrics; a longer answer gives no value")
	fs.IntVar(&a.opts.MaxScrapeSeries, "scrape-max-series", metrics.DefaultMaxScrapeSeries, "the most series read from one Pod's /metrics; an answer with more gives no value")
	fs.StringSliceVar(&a.opts.AnnotatedNamespaces, "scrape-annotated-namespaces", nil, "comma-separated namespaces whose Pods labelled sluice.dev/scrape=true are scraped, as their sluice.dev/port annotation says; empty means every namespace (ProviderQuotas' Pods are scraped wherever they are)")
	fs.StringArrayVar(&a.gateways, "gateway-usage", nil, "NAMESPACE=URL: a gateway's queues endpoint (…/admin/queues), queueing for the ProviderQuotas of NAMESPACE; repeat for each gateway")
	fs.StringVar(&a.gatewaySelector, "gateway-selector", "", "label selector of the gateway Pods, in every namespace, such as app.kubernetes.io/name=sluice-gateway; each queues for the ProviderQuotas of its namespace")
	fs.IntVar(&a.gatewayPort, "gateway-admin-port", 9090, "the gateway Pods' admin port, which serves /admin/queues")
	fs.StringVar(&a.opts.GatewayAdminTokenFile, "gateway-admin-token-file", "", "file of the token the gateways' admin endpoints ask for (their --admin-token-file), sent at each poll to the gateways of --gateway-admin-token-namespace; empty sends none")
	fs.StringVar(&a.opts.GatewayAdminTokenNamespace, "gateway-admin-token-namespace", "", "the namespace of the gateways --gateway-admin-token-file is for; the token goes to no gateway elsewhere")
}

// run builds the metrics provider and serves the metrics APIs until ctx ends.
func (a *adapter) run(ctx context.Context) error {
	ctrllog.SetLogger(klog.NewKlogr())
	if err := a.setGatewayOptions(); err != nil {
		return err
	}
	cfg, err := a.ClientConfig()
	if err != nil {
		return err
	}
	mapper, err := a.refreshedRESTMapper(ctx)
	if err != nil {
		return err
	}
	if err := checkScrapeLimits(a.opts); err != nil {
		return err
	}
	quotas, err := newQuotaCache(cfg)
	if err != nil {
		return err
	}
	pods, err := a.newPodCache(cfg, quotas)
	if err != nil {
		return err
	}
	provider, err := a.newProvider(quotas, pods, mapper)
	if err != nil {
		return err
	}
	go runQuotaCache(ctx, quotas)
	go func() {
		// The Pods to watch follow the ProviderQuotas: read none before their cache runs.
		if quotas.WaitForCacheSync(ctx) {
			pods.Run(ctx)
		}
	}()
	go provider.Run(ctx)
	return a.Run(ctx)
}

// setGatewayOptions reads the gateway flags into a.opts.
func (a *adapter) setGatewayOptions() error {
	gateways, err := parseGateways(a.gateways)
	if err != nil {
		return err
	}
	selector, err := parseSelector(a.gatewaySelector)
	if err != nil {
		return err
	}
	if a.gatewayPort < 1 || a.gatewayPort > 65535 {
		return fmt.Errorf("--gateway-admin-port %d: want a port from 1 to 65535", a.gatewayPort)
	}
	if path := a.opts.GatewayAdminTokenFile; path != "" {
		if _, err := gatewayv1.ReadAdminToken(path); err != nil {
			return fmt.Errorf("--gateway-admin-token-file: %w", err)
		}
		if a.opts.GatewayAdminTokenNamespace == "" {
			return errors.New("--gateway-admin-token-file: must come with --gateway-admin-token-namespace, the namespace of the gateways it is for")
		}
	}
	a.opts.Gateways, a.opts.GatewaySelector, a.opts.GatewayPort = gateways, selector, int32(a.gatewayPort)
	return nil
}

// refreshedRESTMapper is the API server's REST mapper, kept fresh until ctx ends.
func (a *adapter) refreshedRESTMapper(ctx context.Context) (meta.RESTMapper, error) {
	mapper, err := a.RESTMapper()
	if err != nil {
		return nil, err
	}
	// The library builds the mapper from discovery once; ProviderQuota's
	// CRD may come later, so keep it fresh.
	if m, ok := mapper.(*dynamicmapper.RegeneratingDiscoveryRESTMapper); ok && a.DiscoveryInterval > 0 {
		m.RunUntil(ctx.Done())
	}
	return mapper, nil
}

// newQuotaCache is the cache the adapter reads ProviderQuotas from, in every namespace. Pods are
// read from a PodCache: a Pod read through this cache would have it cache every Pod of the
// cluster.
func newQuotaCache(cfg *rest.Config) (cache.Cache, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	quotas, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, fmt.Errorf("informer cache: %w", err)
	}
	return quotas, nil
}

// runQuotaCache fills the cache and keeps it current until ctx ends.
func runQuotaCache(ctx context.Context, quotas cache.Cache) {
	if err := quotas.Start(ctx); err != nil {
		klog.ErrorS(err, "Informer cache stopped")
	}
}

// newPodCache is the cache of the Pods the adapter can use: those the ProviderQuotas of quotas
// select, the gateways and the labelled Pods.
func (a *adapter) newPodCache(cfg *rest.Config, quotas client.Reader) (*metrics.PodCache, error) {
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	return metrics.NewPodCache(metrics.PodCacheOptions{
		Client: clientset, Quotas: quotas, GatewaySelector: a.opts.GatewaySelector,
		AnnotatedNamespaces: a.opts.AnnotatedNamespaces, Interval: a.opts.Interval,
	}), nil
}

// newProvider builds the metrics provider on its readers and mapper, and has the API server serve
// its custom and external metrics. It registers the provider's own metrics and the API server's.
func (a *adapter) newProvider(quotas, pods client.Reader, mapper meta.RESTMapper) (*metrics.Provider, error) {
	a.opts.Quotas, a.opts.Pods, a.opts.Mapper = quotas, pods, mapper
	p := metrics.New(a.opts)
	a.WithCustomMetrics(p)
	a.WithExternalMetrics(p)
	if err := apimetrics.RegisterMetrics(legacyregistry.Register); err != nil {
		return nil, err
	}
	if err := p.RegisterMetrics(legacyregistry.Register, legacyregistry.CustomRegister); err != nil {
		return nil, err
	}
	return p, nil
}

// checkScrapeLimits refuses caps that would let no Pod report.
func checkScrapeLimits(o metrics.Options) error {
	if o.MaxScrapeBytes < 1 || o.MaxScrapeSeries < 1 {
		return fmt.Errorf("--scrape-max-bytes %d and --scrape-max-series %d: want both at least 1", o.MaxScrapeBytes, o.MaxScrapeSeries)
	}
	return nil
}

// parseGateways reads --gateway-usage values into URLs by namespace.
func parseGateways(values []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range values {
		ns, url, ok := strings.Cut(v, "=")
		if !ok || ns == "" || !strings.HasPrefix(url, "http") {
			return nil, fmt.Errorf("--gateway-usage %q: want NAMESPACE=URL, such as ai=http://10.0.0.1:9090/admin/queues", v)
		}
		out[ns] = append(out[ns], url)
	}
	return out, nil
}

// parseSelector reads --gateway-selector; empty means no gateway Pods.
func parseSelector(s string) (labels.Selector, error) {
	if s == "" {
		return nil, nil
	}
	selector, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--gateway-selector %q: %w", s, err)
	}
	if selector.Empty() {
		return nil, fmt.Errorf("--gateway-selector %q: want a selector that picks the gateway Pods, such as app.kubernetes.io/name=sluice-gateway", s)
	}
	return selector, nil
}
