// Command manager is Sluice's operator. It compiles the ProviderQuotas and
// TenantPlans of the gateways' namespace into the configuration Secret the
// gateways mount, writes the gateways' usage into their status, and keeps
// the durable record of their calendar windows in ConfigMaps they mount.
//
//	manager --namespace sluice --gateway-selector app.kubernetes.io/name=sluice-gateway
//
// It is wiring only; the work is in packages controllers and
// controllers/usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers"
	"github.com/sluicehq/sluice/controllers/usage"
)

// name names the manager in events and in its leader-election lease.
const name = "sluice-manager"

// options are the command line's.
type options struct {
	namespace, secretName, baseConfig string
	gatewaySelector, gatewayURLs      string
	gatewayAdminPort                  int
	gatewayAdminTokenFile             string
	usageInterval                     time.Duration
	metricsAddr, probeAddr            string
	leaderElect                       bool

	// The serving certificate: see addCertRotator.
	issueServingCert                                        bool
	servingCertSecret, servingCertNamespace, metricsCertDir string
	servingCertDNSNames, caInjectAPIServices                []string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	o := parseFlags()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil)))
	ctx := ctrl.SetupSignalHandler()
	mgr, err := newManager(ctx, o)
	if err != nil {
		return err
	}
	if err := setup(ctx, mgr, o); err != nil {
		return err
	}
	ctrl.Log.Info("manager starting", "namespace", o.namespace, "secret", o.secretName)
	return mgr.Start(ctx)
}

// parseFlags reads the flags.
func parseFlags() *options {
	o := &options{}
	defineFlags(flag.CommandLine, o)
	flag.Parse()
	return o
}

// defineFlags defines the manager's flags on fs, each setting its field of o.
func defineFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "default"), "the gateways' namespace, whose ProviderQuotas and TenantPlans are compiled")
	fs.StringVar(&o.secretName, "config-secret", "sluice-gateway-config", "the configuration Secret the gateways mount, in --namespace")
	fs.StringVar(&o.baseConfig, "base-config", "", "a gateway configuration file whose server, store, jobs, batches and global limits the compiled configuration carries; empty means an in-memory store")
	fs.StringVar(&o.gatewaySelector, "gateway-selector", "", "label selector of the gateway Pods to poll for usage, such as app.kubernetes.io/name=sluice-gateway")
	fs.IntVar(&o.gatewayAdminPort, "gateway-admin-port", 9090, "the gateway Pods' admin port, which serves "+usage.Path)
	fs.StringVar(&o.gatewayAdminTokenFile, "gateway-admin-token-file", "", "file of the token the gateways' admin endpoints ask for (their --admin-token-file), sent at each poll; empty sends none")
	fs.StringVar(&o.gatewayURLs, "gateway-usage-urls", "", "comma-separated usage URLs of gateways to poll besides, or instead of, --gateway-selector")
	fs.DurationVar(&o.usageInterval, "usage-interval", usage.DefaultInterval, "time between polls of the gateways' usage")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics; 0 turns it off")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that one of several replicas works at a time")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory of the certificate (tls.crt, tls.key) /metrics is served with over HTTPS; empty means a self-signed one")
	fs.BoolVar(&o.issueServingCert, "issue-serving-cert", false, "issue and renew the serving certificate into --serving-cert-secret, from a CA kept there, and write the CA into --ca-inject-apiservices")
	fs.StringVar(&o.servingCertSecret, "serving-cert-secret", "", "the Secret, in --serving-cert-namespace, that holds the serving certificate; it must exist")
	fs.StringVar(&o.servingCertNamespace, "serving-cert-namespace", envOr("POD_NAMESPACE", "default"), "the namespace of --serving-cert-secret")
	fs.Func("serving-cert-dns-names", "comma-separated DNS names the serving certificate is for", commaList(&o.servingCertDNSNames))
	fs.Func("ca-inject-apiservices", "comma-separated APIServices whose caBundle gets the serving certificate's CA", commaList(&o.caInjectAPIServices))
}

func newManager(ctx context.Context, o *options) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.namespace: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: controllers.TrimPod}},
		},
		Metrics: metricsserver.Options{
			BindAddress:    o.metricsAddr,
			SecureServing:  true,
			FilterProvider: filters.WithAuthenticationAndAuthorization,
			TLSOpts:        metricsTLS(ctx, o.metricsCertDir),
		},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        name,
		LeaderElectionNamespace: o.namespace,
	})
}

// setup adds the reconciler, the usage poller if there are gateways to
// poll, which keeps the durable record in ConfigMaps too, and the probes.
func setup(ctx context.Context, mgr ctrl.Manager, o *options) error {
	base, err := loadBase(o.baseConfig)
	if err != nil {
		return err
	}
	if err := addCertRotator(mgr, o); err != nil {
		return err
	}
	if o.gatewayAdminTokenFile != "" {
		if _, err := gatewayv1.ReadAdminToken(o.gatewayAdminTokenFile); err != nil {
			return fmt.Errorf("--gateway-admin-token-file: %w", err)
		}
	}
	r := &controllers.GatewayConfigReconciler{
		Client:     mgr.GetClient(),
		Recorder:   mgr.GetEventRecorder(name),
		SecretName: o.secretName,
		Base:       base,
	}
	gateways, err := gatewayLister(mgr, o)
	if err != nil {
		return err
	}
	if gateways != nil {
		updates := make(chan event.GenericEvent)
		record := &controllers.RecordConfigMaps{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(name), Namespace: o.namespace, SecretName: o.secretName}
		poller := &usage.Poller{Namespace: o.namespace, Gateways: gateways, Interval: o.usageInterval, Updates: updates, Record: record,
			AdminTokenFile: o.gatewayAdminTokenFile}
		if err := mgr.Add(leaderOnly{poller}); err != nil {
			return err
		}
		r.Usage, r.UsageUpdates = poller, updates
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// leaderOnly runs a Runnable on the elected leader only. The usage poller
// runs so: its updates make the reconciler write status, which only the
// leader does, and it writes the durable record.
type leaderOnly struct{ manager.Runnable }

var _ manager.LeaderElectionRunnable = leaderOnly{}

// NeedLeaderElection reports true.
func (leaderOnly) NeedLeaderElection() bool { return true }

// The manager's leader election takes a lease and records its changes in
// core events.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// loadBase reads the base configuration, if any.
func loadBase(path string) (*gatewayv1.Config, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --base-config: %w", err)
	}
	return gatewayv1.Parse(data)
}

// gatewayLister lists the gateways the flags name, or returns nil if they
// name none.
func gatewayLister(mgr ctrl.Manager, o *options) (usage.GatewayLister, error) {
	var listers usage.AllGateways
	if o.gatewaySelector != "" {
		sel, err := labels.Parse(o.gatewaySelector)
		if err != nil {
			return nil, fmt.Errorf("--gateway-selector: %w", err)
		}
		if sel.Empty() {
			return nil, errors.New("--gateway-selector: must select something: an empty selector selects every Pod")
		}
		listers = append(listers, &usage.PodGateways{Reader: mgr.GetClient(), Namespace: o.namespace, Selector: sel, Port: int32(o.gatewayAdminPort)})
	}
	if o.gatewayURLs != "" {
		listers = append(listers, usage.StaticGateways(strings.Split(o.gatewayURLs, ",")))
	}
	if len(listers) == 0 {
		return nil, nil
	}
	return listers, nil
}

// commaList sets *list from a comma-separated flag value.
func commaList(list *[]string) func(string) error {
	return func(value string) error {
		*list = nil
		for _, item := range strings.Split(value, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*list = append(*list, item)
			}
		}
		return nil
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
