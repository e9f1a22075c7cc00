package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// The autoscaling scene: one ProviderQuota "llama" of vLLM Pods, each a `lab inference` process
// that runs maxNumSeqs requests at once and queues the rest.
const (
	inferenceNamespace = "ai"
	inferenceName      = "llama"
	inferencePort      = 8000
	maxNumSeqs         = 2
	// gpuQuota / gpusPerPod is the HPA's maxReplicas, as the ProviderQuota's gpuQuota says.
	gpuQuota, gpusPerPod = 3, 1
	maxReplicas          = gpuQuota / gpusPerPod
	// targetWaiting is the HPA's target: requests waiting per Pod, on average.
	targetWaiting = 2
	// loadWorkers keep this many requests in flight: with one Pod, 10 wait (the HPA wants 5
	// replicas, more than maxReplicas); with three, 6 wait, 2 a Pod, the target.
	loadWorkers = 12
	// loadLimit and loadRequests bound the load whatever happens.
	loadLimit, loadRequests = 4 * time.Minute, 5000
	// settle bounds each wait on the control plane; generous, since the machine is shared.
	settle = 3 * time.Minute
)

var (
	inferenceLabels = map[string]string{"app": inferenceName}
	waitingPath     = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + inferenceNamespace + "/pods/*/" + metrics.RequestsWaiting
)

// TestHPAScalesInferencePodsOnWaitingRequests runs the metrics adapter behind the aggregator of a
// local control plane with kube-controller-manager, and an HPA on inference_requests_waiting:
// load makes requests wait in the Pods, the Deployment grows to maxReplicas and no further, and
// shrinks back when the load stops. A Pod whose process is stopped then has no value, not 0.
func TestHPAScalesInferencePodsOnWaitingRequests(t *testing.T) {
	c := cluster.Start(t, cluster.Options{ControllerManager: true, Aggregator: true})
	ctx := t.Context()
	// The adapter starts before the CRDs exist, so the ProviderQuota's object metric below is
	// served only if the adapter refreshes its REST mapper and its informers find the new kind.
	gatewayPort := fakeGateway(t, map[string]int64{inferenceName: 4})
	adapter := startAdapter(t, c, gatewayPort, inferenceNamespace)
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install the CRDs: %v", err)
	}
	pods := &inferencePods{stop: map[string]context.CancelFunc{}, model: inferenceName, seqs: maxNumSeqs}
	c.RunPods(t, inferenceNamespace, labels.SelectorFromSet(inferenceLabels), pods.start)
	t.Cleanup(pods.stopAll)
	c.RegisterMetricsAdapter(t, adapter.port)
	c.Kubectl(t, "apply", "-f", writeManifest(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+inferenceNamespace+"}\n---\n"+providerQuota()))
	c.AddRunningPod(t, gatewayPod(), "127.0.0.1")
	if _, err := c.Clientset.AppsV1().Deployments(inferenceNamespace).Create(ctx, cluster.Deployment(inferenceName, inferenceLabels, inferencePort), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(inferenceNamespace).Create(ctx, waitingHPA(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the HPA at the end:\n%s", c.Kubectl(t, "describe", "hpa", "-n", inferenceNamespace, inferenceName))
		}
	})

	// Through the aggregator: the idle Pod's value, then the gateway's queue as an object and
	// as an external metric.
	poll.Until(t, settle, "the idle Pod's inference_requests_waiting through the aggregator", func() bool {
		values, _ := podValues(ctx, c)
		return len(values) == 1
	})
	var viaKubectl cmv1beta2.MetricValueList
	if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "--raw", waitingPath)), &viaKubectl); err != nil {
		t.Fatal(err)
	}
	if len(viaKubectl.Items) != 1 || viaKubectl.Items[0].DescribedObject.Kind != "Pod" || viaKubectl.Items[0].Value.Sign() != 0 {
		t.Errorf("kubectl get --raw %s = %+v; want the idle Pod's 0", waitingPath, viaKubectl.Items)
	}
	// The same through custom.metrics.k8s.io/v1beta1, for HPAs and tools that ask for it.
	var v1beta1 struct {
		Kind  string
		Items []struct{ DescribedObject struct{ Kind string } }
	}
	v1beta1Path := strings.Replace(waitingPath, "/v1beta2/", "/v1beta1/", 1)
	if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "--raw", v1beta1Path)), &v1beta1); err != nil {
		t.Fatal(err)
	}
	if v1beta1.Kind != "MetricValueList" || len(v1beta1.Items) != 1 || v1beta1.Items[0].DescribedObject.Kind != "Pod" {
		t.Errorf("kubectl get --raw %s = %+v; want the idle Pod's value", v1beta1Path, v1beta1)
	}
	checkGatewayQueue(t, ctx, c, metrics.QueueDepth, "4")
	checkGatewayQueue(t, ctx, c, metrics.QueuedTokens, "4k")

	// Load: requests wait, the HPA wants more replicas, but never more than maxReplicas.
	load := startLoad(t, c)
	var rose, wanted time.Time
	poll.Until(t, settle, "waiting requests in the served values", func() bool {
		values, _ := podValues(ctx, c)
		for _, v := range values {
			if v.Value.Sign() > 0 {
				rose = time.Now()
				t.Logf("waiting requests served %s after the load started (value %s, taken %s before it was served)",
					rose.Sub(load.started).Round(time.Millisecond), v.Value.String(), rose.Sub(v.Timestamp.Time).Round(time.Second))
				return true
			}
		}
		return false
	})
	poll.Until(t, settle, "the HPA to want more replicas", func() bool {
		h := hpa(t, ctx, c)
		if h.Status.DesiredReplicas > 1 {
			wanted = time.Now()
			t.Logf("the HPA wants %d replicas %s after the waiting requests were served", h.Status.DesiredReplicas, wanted.Sub(rose).Round(time.Millisecond))
		}
		return h.Status.DesiredReplicas > 1
	})
	limited := false
	poll.Until(t, settle, fmt.Sprintf("the Deployment to grow to %d running Pods, each with a value", maxReplicas), func() bool {
		h, d := hpa(t, ctx, c), deployment(t, ctx, c)
		if h.Status.DesiredReplicas > maxReplicas || *d.Spec.Replicas > maxReplicas {
			t.Fatalf("the HPA wants %d replicas and the Deployment has %d; want at most maxReplicas, %d", h.Status.DesiredReplicas, *d.Spec.Replicas, maxReplicas)
		}
		limited = limited || hasCondition(h, autoscalingv2.ScalingLimited, "TooManyReplicas")
		values, _ := podValues(ctx, c)
		return *d.Spec.Replicas == maxReplicas && len(readyPodIPs(ctx, c)) == maxReplicas && len(values) == maxReplicas
	})
	t.Logf("the HPA said it was held at maxReplicas (ScalingLimited, TooManyReplicas): %t", limited)
	logAdapterMetrics(t, ctx, c, adapter)

	// The load stops: nothing waits, and the HPA scales back down after its stabilisation window.
	load.stop()
	t.Logf("load: %d requests answered, %d failed", load.answered.Load(), load.failed.Load())
	poll.Until(t, settle, "the Deployment to shrink back to 1 Pod", func() bool {
		h, d := hpa(t, ctx, c), deployment(t, ctx, c)
		return h.Status.DesiredReplicas == 1 && *d.Spec.Replicas == 1 && d.Status.Replicas == 1
	})

	// A Pod whose process stops has no value: not 0, not its last one.
	var last string
	poll.Until(t, settle, "one Pod left, with a value", func() bool {
		values, _ := podValues(ctx, c)
		if len(values) == 1 && len(readyPodIPs(ctx, c)) == 1 {
			last = values[0].DescribedObject.Name
		}
		return last != ""
	})
	pods.stopProcess(last)
	poll.Until(t, settle, "the stopped Pod's value to go", func() bool {
		values, err := podValues(ctx, c)
		return err == nil && len(values) == 0
	})
	byName := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + inferenceNamespace + "/pods/" + last + "/" + metrics.RequestsWaiting
	if body, err := rawGet(ctx, c, byName); !apierrors.IsNotFound(err) {
		t.Errorf("GET %s for the stopped Pod = %s, %v; want not found", byName, body, err)
	}
}

// inferencePods plays each Pod as a `lab inference` process serving model, seqs requests at
// once, and can stop one, as a crash would.
type inferencePods struct {
	model string
	seqs  int

	mu   sync.Mutex
	stop map[string]context.CancelFunc // by Pod name
}

func (p *inferencePods) start(pod *corev1.Pod, ip string) *exec.Cmd {
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.stop[pod.Name] = cancel
	p.mu.Unlock()
	return exec.CommandContext(ctx, labBin, "inference",
		"-listen", net.JoinHostPort(ip, strconv.Itoa(inferencePort)),
		"-engine", "vllm", "-model", p.model, "-gpus", strconv.Itoa(gpusPerPod),
		"-max-num-seqs", strconv.Itoa(p.seqs), "-token-latency", "50ms", "-default-max-tokens", "20")
}

// stopProcess kills a Pod's process; the Pod stays Running in the API, as it would until a real
// kubelet noticed.
func (p *inferencePods) stopProcess(pod string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop[pod]()
}

func (p *inferencePods) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cancel := range p.stop {
		cancel()
	}
}

// adapterProcess is a running metrics adapter.
type adapterProcess struct {
	port int
	proc *proc.Process
}

// startAdapter runs the metrics adapter on 127.0.0.1, as the notes on the control plane say: it
// lists with the admin's kubeconfig and delegates authentication and authorization to the API
// server, which proxies to it with the front-proxy certificate. It sends the admin token to the
// gateways of gatewayNamespace only.
func startAdapter(t *testing.T, c *cluster.Cluster, gatewayPort int, gatewayNamespace string) *adapterProcess {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	cmd := exec.Command(adapterBin,
		"--secure-port="+port, "--bind-address=127.0.0.1", "--cert-dir="+t.TempDir(),
		"--lister-kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--discovery-interval=5s", "--gateway-selector="+gatewaySelector, "--gateway-admin-port="+strconv.Itoa(gatewayPort),
		"--gateway-admin-token-file="+adminTokenFile(t), "--gateway-admin-token-namespace="+gatewayNamespace, "--v=2")
	n, _ := strconv.Atoi(port)
	return &adapterProcess{port: n, proc: proc.Start(t, "metrics-adapter", cmd)}
}

func providerQuota() string {
	return fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ProviderQuota
metadata: {name: %[1]s, namespace: %[2]s, labels: {tier: gpu}}
spec:
  selfHosted:
    selector: {matchLabels: {app: %[1]s}}
    port: %[3]d
    engine: vllm
    gpusPerPod: %[4]d
    maxConcurrencyPerGPU: %[5]d
    gpuQuota: %[6]d
  models:
    - name: %[1]s
`, inferenceName, inferenceNamespace, inferencePort, gpusPerPod, maxNumSeqs, gpuQuota)
}

func writeManifest(t *testing.T, manifest string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitingHPA scales the Deployment on the requests waiting per Pod, within the GPU quota, and
// scales down after 10 s without need rather than 5 minutes.
func waitingHPA() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: inferenceName},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: inferenceName},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: metrics.RequestsWaiting},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(targetWaiting, resource.DecimalSI)},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](10)},
			},
		},
	}
}

// gatewaySelector selects the gateway Pods for the adapter.
const gatewaySelector = "app.kubernetes.io/name=sluice-gateway"

// fakeGateway serves a gateway's usage snapshot, taken now, with the requests queued per
// provider given, of 1,000 estimated tokens each, on 127.0.0.1, to callers that send adminToken;
// it returns the port.
func fakeGateway(t *testing.T, queued map[string]int64) int {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/queues", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+adminToken {
			http.Error(w, "no admin token", http.StatusUnauthorized)
			return
		}
		q := gatewayv1.Queues{Gateway: "gw-test", Time: metav1.Now()}
		for name, n := range queued {
			q.Providers = append(q.Providers, gatewayv1.QueueDepth{Name: name, Queued: n, QueuedTokens: 1000 * n})
		}
		json.NewEncoder(w).Encode(q)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// gatewayPod is the fake gateway's Pod, which the adapter finds by its labels.
func gatewayPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sluice-gateway-0", Namespace: inferenceNamespace, Labels: map[string]string{"app.kubernetes.io/name": "sluice-gateway"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "sluice-gateway"}}},
	}
}

// checkGatewayQueue reads a metric of the gateway's queue for the ProviderQuota as a custom
// metric of the object, which needs the adapter's REST mapper to know the CRD, and as an
// external metric.
func checkGatewayQueue(t *testing.T, ctx context.Context, c *cluster.Cluster, metric, want string) {
	t.Helper()
	object := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + inferenceNamespace + "/providerquotas.sluice.dev/" + inferenceName + "/" + metric
	external := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + inferenceNamespace + "/" + metric
	var got []string
	poll.Until(t, settle, "the gateway's "+metric+" as an object and an external metric", func() bool {
		got = nil
		var objectList cmv1beta2.MetricValueList
		var externalList emv1beta1.ExternalMetricValueList
		if getJSON(ctx, c, object, "", &objectList) != nil || getJSON(ctx, c, external, metrics.LabelProviderQuota+"="+inferenceName, &externalList) != nil {
			return false
		}
		for _, v := range objectList.Items {
			got = append(got, v.DescribedObject.Kind+"="+v.Value.String())
		}
		for _, v := range externalList.Items {
			got = append(got, "external="+v.Value.String())
		}
		return len(got) == 2
	})
	if wantGot := []string{"ProviderQuota=" + want, "external=" + want}; strings.Join(got, ",") != strings.Join(wantGot, ",") {
		t.Errorf("the gateway's %s = %v; want %v", metric, got, wantGot)
	}
}

// loadGenerator keeps loadWorkers requests in flight at the Pods that are ready, spread over them
// as a Service would, until stopped or until loadLimit or loadRequests is reached.
type loadGenerator struct {
	started          time.Time
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	sent             atomic.Int64
	answered, failed atomic.Int64
}

func startLoad(t *testing.T, c *cluster.Cluster) *loadGenerator {
	ctx, cancel := context.WithTimeout(context.Background(), loadLimit)
	g := &loadGenerator{started: time.Now(), cancel: cancel}
	var targets atomic.Pointer[[]string]
	targets.Store(new([]string))
	g.wg.Go(func() {
		for ctx.Err() == nil {
			ips := readyPodIPs(ctx, c)
			targets.Store(&ips)
			sleep(ctx, 500*time.Millisecond)
		}
	})
	for w := range loadWorkers {
		g.wg.Go(func() {
			for n := w; ctx.Err() == nil && g.sent.Add(1) <= loadRequests; n++ {
				ips := *targets.Load()
				if len(ips) == 0 || !g.call(ctx, ips[n%len(ips)]) {
					sleep(ctx, 100*time.Millisecond)
				}
			}
		})
	}
	t.Cleanup(g.stop)
	return g
}

// call sends one chat completion and reports whether it was answered.
func (g *loadGenerator) call(ctx context.Context, ip string) bool {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Summarise page one."}],"max_tokens":20}`, inferenceName)
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(inferencePort)) + "/v1/chat/completions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			g.failed.Add(1)
		}
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.failed.Add(1)
		return false
	}
	g.answered.Add(1)
	return true
}

// stop ends the load and waits for it; the requests in flight are cancelled, so they leave the
// Pods' queues. stop may be called more than once.
func (g *loadGenerator) stop() {
	g.cancel()
	g.wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// readyPodIPs returns the addresses of the inference Pods that are ready and not going away.
func readyPodIPs(ctx context.Context, c *cluster.Cluster) []string {
	list, err := c.Clientset.CoreV1().Pods(inferenceNamespace).List(ctx, metav1.ListOptions{LabelSelector: labels.FormatLabels(inferenceLabels)})
	if err != nil {
		return nil
	}
	var ips []string
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil && pod.Status.PodIP != "" && cluster.PodReady(&pod) {
			ips = append(ips, pod.Status.PodIP)
		}
	}
	return ips
}

func hasCondition(h *autoscalingv2.HorizontalPodAutoscaler, kind autoscalingv2.HorizontalPodAutoscalerConditionType, reason string) bool {
	for _, c := range h.Status.Conditions {
		if c.Type == kind && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// podValues reads every inference Pod's inference_requests_waiting through the aggregator.
func podValues(ctx context.Context, c *cluster.Cluster) ([]cmv1beta2.MetricValue, error) {
	return podMetricValues(ctx, c, inferenceNamespace, metrics.RequestsWaiting, inferenceLabels)
}

// podMetricValues reads a metric of the Pods of namespace that selector selects through the
// aggregator.
func podMetricValues(ctx context.Context, c *cluster.Cluster, namespace, metric string, selector map[string]string) ([]cmv1beta2.MetricValue, error) {
	var list cmv1beta2.MetricValueList
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + namespace + "/pods/*/" + metric
	err := getJSON(ctx, c, path, labels.FormatLabels(selector), &list)
	return list.Items, err
}

// getJSON reads path, with a label selector unless it is empty, into v.
func getJSON(ctx context.Context, c *cluster.Cluster, path, selector string, v any) error {
	req := c.Clientset.Discovery().RESTClient().Get().AbsPath(path)
	if selector != "" {
		req = req.Param("labelSelector", selector)
	}
	body, err := req.DoRaw(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// rawGet is kubectl get --raw, with the API's error kept for apierrors.
func rawGet(ctx context.Context, c *cluster.Cluster, path string) ([]byte, error) {
	return c.Clientset.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
}

func hpa(t *testing.T, ctx context.Context, c *cluster.Cluster) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	return hpaOf(t, ctx, c, inferenceNamespace, inferenceName)
}

func hpaOf(t *testing.T, ctx context.Context, c *cluster.Cluster, namespace, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h, err := c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func deployment(t *testing.T, ctx context.Context, c *cluster.Cluster) *appsv1.Deployment {
	t.Helper()
	return deploymentOf(t, ctx, c, inferenceNamespace, inferenceName)
}

func deploymentOf(t *testing.T, ctx context.Context, c *cluster.Cluster, namespace, name string) *appsv1.Deployment {
	t.Helper()
	d, err := c.Clientset.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// logAdapterMetrics reports, from the adapter's own /metrics, how old the values it served were
// (the library's freshness histogram) and how long its scrapes took.
func logAdapterMetrics(t *testing.T, ctx context.Context, c *cluster.Cluster, a *adapterProcess) {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port))
	cfg.TLSClientConfig.Insecure, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = true, nil, ""
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("the adapter's /metrics: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the adapter's /metrics (%s): %v", resp.Status, err)
	}
	for _, name := range []string{"metrics_apiserver_metric_freshness_seconds", "sluice_adapter_scrape_duration_seconds"} {
		if h := histogram(families[name]); h != nil && h.GetSampleCount() > 0 {
			t.Logf("%s: mean %.3fs over %d", name, h.GetSampleSum()/float64(h.GetSampleCount()), h.GetSampleCount())
		} else {
			t.Errorf("the adapter's /metrics has no %s", name)
		}
	}
}

// histogram returns the family's first histogram, or nil.
func histogram(f *dto.MetricFamily) *dto.Histogram {
	if f == nil || len(f.GetMetric()) == 0 {
		return nil
	}
	return f.GetMetric()[0].GetHistogram()
}
