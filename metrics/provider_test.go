package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// t0 is a whole second: usage snapshots carry their time to the second.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakePod is an inference Pod's /metrics, on its own loopback address.
type fakePod struct {
	srv  *httptest.Server
	mu   sync.Mutex
	text string
}

func (f *fakePod) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprint(w, f.text)
}

// startPods starts one fakePod per address, all on one port, as the Pods of
// a Deployment listen; it returns the port.
func startPods(t *testing.T, texts map[string]string) (int32, map[string]*fakePod) {
	t.Helper()
	for range 10 {
		if port, pods, ok := tryStartPods(t, texts); ok {
			return port, pods
		}
	}
	t.Fatal("no port free on every address")
	return 0, nil
}

func tryStartPods(t *testing.T, texts map[string]string) (int32, map[string]*fakePod, bool) {
	pods := map[string]*fakePod{}
	port := "0"
	for ip, text := range texts {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
		if err != nil {
			for _, p := range pods {
				p.srv.Close()
			}
			return 0, nil, false
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		p := &fakePod{text: text}
		p.srv = httptest.NewUnstartedServer(p)
		p.srv.Listener.Close()
		p.srv.Listener = ln
		p.srv.Start()
		t.Cleanup(p.srv.Close)
		pods[ip] = p
	}
	n, _ := strconv.Atoi(port)
	return int32(n), pods, true
}

// gatewayToken is the admin token of the gateways of gatewayQueues.
const gatewayToken = "gateway-admin-token"

// gatewayTokenFile writes gatewayToken into a file, as a mounted Secret, and
// returns its path.
func gatewayTokenFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(gatewayToken), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// gatewayQueues serves a gateway's queue snapshot at /admin/queues, with
// queued requests of 1,000 estimated tokens each, to callers that send
// gatewayToken, and nothing else.
func gatewayQueues(t *testing.T, at time.Time, queued map[string]int64) *httptest.Server {
	q := gatewayv1.Queues{Gateway: "gw-0", Time: metav1.NewTime(at)}
	for name, n := range queued {
		q.Providers = append(q.Providers, gatewayv1.QueueDepth{Name: name, Queued: n, QueuedTokens: 1000 * n})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+usage.QueuesPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+gatewayToken {
			http.Error(w, "no admin token", http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(q)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func testMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), apimeta.RESTScopeNamespace)
	m.Add(v1alpha1.GroupVersion.WithKind("ProviderQuota"), apimeta.RESTScopeNamespace)
	return m
}

func testReader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

var (
	podsInfo   = provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: RequestsWaiting}
	quotasInfo = provider.CustomMetricInfo{GroupResource: schema.GroupResource{Group: "sluice.dev", Resource: "providerquotas"}, Namespaced: true, Metric: QueueDepth}
)

// servedValue is a value as the API serves it, for comparisons.
type servedValue struct {
	Kind, Name, Value string
	At                time.Time
}

func asServed(items []custom_metrics.MetricValue) []servedValue {
	var out []servedValue
	for _, v := range items {
		out = append(out, servedValue{v.DescribedObject.Kind, v.DescribedObject.Name, v.Value.String(), v.Timestamp.Time})
	}
	return out
}

func checkList(t *testing.T, p *Provider, ns string, selector labels.Selector, info provider.CustomMetricInfo, want []servedValue) {
	t.Helper()
	list, err := p.GetMetricBySelector(context.Background(), ns, selector, info, labels.Everything())
	if err != nil {
		t.Fatalf("GetMetricBySelector(%s, %s, %s): %v", ns, selector, info.Metric, err)
	}
	if diff := cmp.Diff(want, asServed(list.Items)); diff != "" {
		t.Errorf("GetMetricBySelector(%s, %s, %s) (-want +got):\n%s", ns, selector, info.Metric, diff)
	}
}

func checkOne(t *testing.T, p *Provider, name types.NamespacedName, info provider.CustomMetricInfo, want servedValue) {
	t.Helper()
	v, err := p.GetMetricByName(context.Background(), name, info, labels.Everything())
	if err != nil {
		t.Fatalf("GetMetricByName(%s, %s): %v", name, info.Metric, err)
	}
	if diff := cmp.Diff([]servedValue{want}, asServed([]custom_metrics.MetricValue{*v})); diff != "" {
		t.Errorf("GetMetricByName(%s, %s) (-want +got):\n%s", name, info.Metric, diff)
	}
}

func checkNotFound(t *testing.T, p *Provider, name types.NamespacedName, info provider.CustomMetricInfo) {
	t.Helper()
	v, err := p.GetMetricByName(context.Background(), name, info, labels.Everything())
	if !apierrors.IsNotFound(err) {
		t.Errorf("GetMetricByName(%s, %s) = %v, %v; want not found", name, info.Metric, v, err)
	}
}

func checkExternal(t *testing.T, p *Provider, ns string, selector labels.Selector, metric string, want []string) {
	t.Helper()
	list, err := p.GetExternalMetric(context.Background(), ns, selector, provider.ExternalMetricInfo{Metric: metric})
	if err != nil {
		t.Fatalf("GetExternalMetric(%s, %s): %v", ns, selector, err)
	}
	var got []string
	for _, v := range list.Items {
		got = append(got, v.Value.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetExternalMetric(%s, %s) (-want +got):\n%s", ns, selector, diff)
	}
}

// TestProviderServesWhatPodsAndGatewaysReport runs the provider on two
// vLLM Pods of a ProviderQuota, a labelled TGI Pod and a gateway, then
// stops a Pod and lets time pass.
func TestProviderServesWhatPodsAndGatewaysReport(t *testing.T) {
	ctx := context.Background()
	port, pods := startPods(t, map[string]string{
		"127.0.0.2": "vllm:num_requests_waiting{model_name=\"m\"} 3\nvllm:num_requests_running{model_name=\"m\"} 2\n",
		"127.0.0.3": "vllm:num_requests_waiting{model_name=\"m\"} 5\nvllm:num_requests_running{model_name=\"m\"} 2\n",
	})
	tgi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "tgi_queue_size 9\n") }))
	defer tgi.Close()
	_, tgiPort, _ := net.SplitHostPort(tgi.Listener.Addr().String())
	quota := selfHosted("llama", "ai", map[string]string{"app": "llama"}, port, v1alpha1.EngineVLLM, 2)
	llamaA := runningPod("ai", "llama-a", "127.0.0.2", map[string]string{"app": "llama"}, nil)
	llamaB := runningPod("ai", "llama-b", "127.0.0.3", map[string]string{"app": "llama"}, nil)
	labelled := runningPod("ai", "tgi-0", "127.0.0.1", map[string]string{"app": "tgi", LabelScrape: "true"}, map[string]string{AnnotationPort: tgiPort})
	gateway := gatewayQueues(t, t0, map[string]int64{"llama": 7})
	clk := clocktesting.NewFakeClock(t0)
	reader := testReader(t, &quota, &llamaA, &llamaB, &labelled)
	p := New(Options{
		Quotas:   reader,
		Pods:     reader,
		Mapper:   testMapper(),
		Gateways: map[string][]string{"ai": {gateway.URL + usage.QueuesPath}},
		Clock:    clk,

		GatewayAdminTokenFile:      gatewayTokenFile(t),
		GatewayAdminTokenNamespace: "ai",
	})

	p.Refresh(ctx)

	llama := labels.SelectorFromSet(labels.Set{"app": "llama"})
	checkList(t, p, "ai", llama, podsInfo, []servedValue{{"Pod", "llama-a", "3", t0}, {"Pod", "llama-b", "5", t0}})
	checkList(t, p, "ai", llama, withMetric(podsInfo, RequestsWaitingPerGPU), []servedValue{{"Pod", "llama-a", "1500m", t0}, {"Pod", "llama-b", "2500m", t0}})
	checkList(t, p, "ai", labels.Everything(), podsInfo, []servedValue{{"Pod", "llama-a", "3", t0}, {"Pod", "llama-b", "5", t0}, {"Pod", "tgi-0", "9", t0}})
	checkList(t, p, "other", labels.Everything(), podsInfo, nil)
	checkOne(t, p, types.NamespacedName{Namespace: "ai", Name: "llama-b"}, withMetric(podsInfo, RequestsRunning), servedValue{"Pod", "llama-b", "2", t0})
	checkOne(t, p, types.NamespacedName{Namespace: "ai", Name: "llama"}, quotasInfo, servedValue{"ProviderQuota", "llama", "7", t0})
	checkList(t, p, "ai", labels.SelectorFromSet(labels.Set{"tier": "gpu"}), quotasInfo, []servedValue{{"ProviderQuota", "llama", "7", t0}})
	checkOne(t, p, types.NamespacedName{Namespace: "ai", Name: "llama"}, withMetric(quotasInfo, QueuedTokens), servedValue{"ProviderQuota", "llama", "7k", t0})
	checkExternal(t, p, "ai", labels.SelectorFromSet(labels.Set{LabelProviderQuota: "llama"}), QueueDepth, []string{"7"})
	checkExternal(t, p, "ai", labels.SelectorFromSet(labels.Set{LabelProviderQuota: "llama"}), QueuedTokens, []string{"7k"})
	checkExternal(t, p, "ai", labels.SelectorFromSet(labels.Set{LabelProviderQuota: "mistral"}), QueueDepth, nil)

	// A Pod that stops answering has no value at once: not 0, not its last.
	pods["127.0.0.3"].srv.Close()
	clk.Step(DefaultInterval)
	t1 := clk.Now()
	p.Refresh(ctx)
	checkList(t, p, "ai", llama, podsInfo, []servedValue{{"Pod", "llama-a", "3", t1}})
	checkNotFound(t, p, types.NamespacedName{Namespace: "ai", Name: "llama-b"}, podsInfo)

	// Values older than three intervals are stale, the gateway's included.
	clk.Step(3*DefaultInterval + time.Nanosecond)
	checkList(t, p, "ai", llama, podsInfo, nil)
	checkNotFound(t, p, types.NamespacedName{Namespace: "ai", Name: "llama-a"}, podsInfo)
	checkNotFound(t, p, types.NamespacedName{Namespace: "ai", Name: "llama"}, quotasInfo)
	checkExternal(t, p, "ai", labels.Everything(), QueueDepth, nil)
}

// TestProviderFindsGatewaysBySelector checks that gateway Pods are found by
// their labels in every namespace, each queueing for its own namespace, that
// the admin token goes only to the gateways of its namespace (a Pod with the
// gateways' labels elsewhere is asked without it, and so answers nothing),
// and that a gateway gone takes its value with it.
func TestProviderFindsGatewaysBySelector(t *testing.T) {
	ctx := context.Background()
	gateway := gatewayQueues(t, t0, map[string]int64{"llama": 4})
	_, port, _ := net.SplitHostPort(gateway.Listener.Addr().String())
	gwPort, _ := strconv.Atoi(port)
	gatewayLabels := map[string]string{"app.kubernetes.io/name": "sluice-gateway"}
	gwPod := runningPod("ai", "gw-0", "127.0.0.1", gatewayLabels, nil)
	other := runningPod("ml", "web-0", "127.0.0.1", map[string]string{"app": "web"}, nil)
	impostor := runningPod("elsewhere", "gw-0", "127.0.0.1", gatewayLabels, nil)
	reader := testReader(t, &gwPod, &other, &impostor)
	p := New(Options{
		Quotas:          reader,
		Pods:            reader,
		Mapper:          testMapper(),
		GatewaySelector: labels.SelectorFromSet(gatewayLabels),
		GatewayPort:     int32(gwPort),
		Clock:           clocktesting.NewFakeClock(t0),

		GatewayAdminTokenFile:      gatewayTokenFile(t),
		GatewayAdminTokenNamespace: "ai",
	})

	p.Refresh(ctx)
	checkOne(t, p, types.NamespacedName{Namespace: "ai", Name: "llama"}, quotasInfo, servedValue{"ProviderQuota", "llama", "4", t0})
	checkExternal(t, p, "ml", labels.Everything(), QueueDepth, nil)
	checkExternal(t, p, "elsewhere", labels.Everything(), QueueDepth, nil)

	if err := reader.(client.Client).Delete(ctx, &gwPod); err != nil {
		t.Fatal(err)
	}
	p.Refresh(ctx)
	checkNotFound(t, p, types.NamespacedName{Namespace: "ai", Name: "llama"}, quotasInfo)
}

// TestProviderKeepsValuesWhenPodsCannotBeListed checks that a failed list
// keeps the last values until they are stale, and no longer.
func TestProviderKeepsValuesWhenPodsCannotBeListed(t *testing.T) {
	ctx := context.Background()
	port, _ := startPods(t, map[string]string{"127.0.0.2": "tgi_queue_size 4\n"})
	quota := selfHosted("tgi", "ai", map[string]string{"app": "tgi"}, port, v1alpha1.EngineTGI, 1)
	pod := runningPod("ai", "tgi-0", "127.0.0.2", map[string]string{"app": "tgi"}, nil)
	reader := &flakyReader{Reader: testReader(t, &quota, &pod)}
	clk := clocktesting.NewFakeClock(t0)
	p := New(Options{Quotas: reader, Pods: reader, Mapper: testMapper(), Clock: clk})
	p.Refresh(ctx)

	reader.err = errors.New("the API server is away")
	clk.Step(DefaultInterval)
	p.Refresh(ctx)
	checkList(t, p, "ai", labels.Everything(), podsInfo, []servedValue{{"Pod", "tgi-0", "4", t0}})

	clk.Step(2*DefaultInterval + time.Nanosecond)
	p.Refresh(ctx)
	checkList(t, p, "ai", labels.Everything(), podsInfo, nil)
}

// TestProviderScrapesLabelledPodsWithoutTheCRD checks that labelled Pods
// are served while the ProviderQuota CRD is not installed.
func TestProviderScrapesLabelledPodsWithoutTheCRD(t *testing.T) {
	port, _ := startPods(t, map[string]string{"127.0.0.2": "llamacpp:requests_deferred 2\n"})
	pod := runningPod("ml", "llamacpp-0", "127.0.0.2", map[string]string{LabelScrape: "true"}, map[string]string{AnnotationPort: strconv.Itoa(int(port))})
	reader := &flakyReader{Reader: testReader(t, &pod), quotaErr: &apimeta.NoKindMatchError{GroupKind: v1alpha1.GroupVersion.WithKind("ProviderQuota").GroupKind()}}
	clk := clocktesting.NewFakeClock(t0)
	p := New(Options{Quotas: reader, Pods: reader, Mapper: testMapper(), Clock: clk})

	p.Refresh(context.Background())

	checkList(t, p, "ml", labels.Everything(), podsInfo, []servedValue{{"Pod", "llamacpp-0", "2", t0}})
}

// flakyReader fails every list with err, and lists of ProviderQuotas with
// quotaErr.
type flakyReader struct {
	client.Reader
	err, quotaErr error
}

func (r *flakyReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.ProviderQuotaList); ok && r.quotaErr != nil {
		return r.quotaErr
	}
	if r.err != nil {
		return r.err
	}
	return r.Reader.List(ctx, list, opts...)
}

func TestProviderRefusesWhatItDoesNotServe(t *testing.T) {
	reader := testReader(t)
	p := New(Options{Quotas: reader, Pods: reader, Mapper: testMapper()})
	name := types.NamespacedName{Namespace: "ai", Name: "x"}
	tests := []struct {
		name     string
		info     provider.CustomMetricInfo
		selector labels.Selector
	}{
		{"an unknown metric", withMetric(podsInfo, "cpu_usage"), labels.Everything()},
		{"a Pod metric of a ProviderQuota", withMetric(quotasInfo, RequestsWaiting), labels.Everything()},
		{"an unknown resource", provider.CustomMetricInfo{GroupResource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Namespaced: true, Metric: RequestsWaiting}, labels.Everything()},
		{"Pods outside a namespace", provider.CustomMetricInfo{GroupResource: podsInfo.GroupResource, Metric: RequestsWaiting}, labels.Everything()},
		{"a metric label no series has", podsInfo, labels.SelectorFromSet(labels.Set{"model": "m"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.GetMetricByName(context.Background(), name, tc.info, tc.selector); !apierrors.IsNotFound(err) {
				t.Errorf("GetMetricByName: err = %v; want not found", err)
			}
			if _, err := p.GetMetricBySelector(context.Background(), "ai", labels.Everything(), tc.info, tc.selector); !apierrors.IsNotFound(err) {
				t.Errorf("GetMetricBySelector: err = %v; want not found", err)
			}
		})
	}
	if _, err := p.GetExternalMetric(context.Background(), "ai", labels.Everything(), provider.ExternalMetricInfo{Metric: "cpu"}); !apierrors.IsNotFound(err) {
		t.Errorf("GetExternalMetric: err = %v; want not found", err)
	}
}

// TestProviderListsItsMetrics checks what discovery shows, for kubectl get
// --raw /apis/custom.metrics.k8s.io/v1beta2.
func TestProviderListsItsMetrics(t *testing.T) {
	p := New(Options{})
	var got []string
	for _, m := range p.ListAllMetrics() {
		got = append(got, m.String())
	}
	want := []string{
		"pods/inference_requests_waiting(namespaced)",
		"pods/inference_requests_running(namespaced)",
		"pods/inference_requests_waiting_per_gpu(namespaced)",
		"providerquotas.sluice.dev/sluice_queue_depth(namespaced)",
		"providerquotas.sluice.dev/sluice_queued_tokens(namespaced)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListAllMetrics (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]provider.ExternalMetricInfo{{Metric: QueueDepth}, {Metric: QueuedTokens}}, p.ListAllExternalMetrics()); diff != "" {
		t.Errorf("ListAllExternalMetrics (-want +got):\n%s", diff)
	}
}

// TestProviderReportsTheNewestValuesAge checks the adapter's freshness
// gauge, read when collected.
func TestProviderReportsTheNewestValuesAge(t *testing.T) {
	port, _ := startPods(t, map[string]string{"127.0.0.2": "tgi_queue_size 4\n"})
	quota := selfHosted("tgi", "ai", map[string]string{"app": "tgi"}, port, v1alpha1.EngineTGI, 1)
	pod := runningPod("ai", "tgi-0", "127.0.0.2", map[string]string{"app": "tgi"}, nil)
	clk := clocktesting.NewFakeClock(t0)
	reader := testReader(t, &quota, &pod)
	p := New(Options{Quotas: reader, Pods: reader, Mapper: testMapper(), Clock: clk})
	reg := basemetrics.NewKubeRegistry()
	if err := p.RegisterMetrics(reg.Register, reg.CustomRegister); err != nil {
		t.Fatal(err)
	}
	if got := gatherAge(t, reg); got != nil {
		t.Errorf("age before any scrape = %v; want none", *got)
	}

	p.Refresh(context.Background())
	clk.Step(1500 * time.Millisecond)

	if got := gatherAge(t, reg); got == nil || *got != 1.5 {
		t.Errorf("age = %v; want 1.5", got)
	}
}

func gatherAge(t *testing.T, reg basemetrics.KubeRegistry) *float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "sluice_adapter_newest_value_age_seconds" && len(f.GetMetric()) == 1 {
			v := f.GetMetric()[0].GetGauge().GetValue()
			return &v
		}
	}
	return nil
}

func withMetric(info provider.CustomMetricInfo, metric string) provider.CustomMetricInfo {
	info.Metric = metric
	return info
}
