package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/controllers"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// The self-hosted scene of config/samples: the quota llama of vLLM Pods with one GPU each and 8
// sequences per GPU, within a quota of 4 GPUs, its HPA, and the enterprise plan of tenant acme,
// which may call it. The manager compiles them; one gateway serves the Secret it writes.
const (
	samplesNamespace  = "sluice"
	sampleModel       = "meta-llama/Llama-3.1-8B-Instruct"
	sampleSeqsPerPod  = 8 // the sample's maxConcurrencyPerGPU × gpusPerPod, and each Pod's max-num-seqs
	sampleMaxReplicas = 4 // the sample HPA's maxReplicas: gpuQuota / gpusPerPod
	// gatewayLoadCalls are kept in flight through the gateway: with one Pod, 8 run and 40 wait in
	// the gateway's queue, 5 Pods' worth, more than the quota allows.
	gatewayLoadCalls = 48
)

var sampleLabels = map[string]string{"app": "llama"}

// selfHostedScene is the samples on a control plane with kube-controller-manager: the manager,
// one gateway on the configuration it writes, the metrics adapter behind the aggregator, and a
// fake kubelet that plays each llama Pod as a `lab inference` process.
type selfHostedScene struct {
	c         *cluster.Cluster
	g         *gateway
	configDir string // where the configuration Secret is mounted
}

// startSelfHostedScene applies the kustomization at samples (relative to the repository) and
// creates the llama Deployment with replicas.
func startSelfHostedScene(t *testing.T, samples string, replicas int32) *selfHostedScene {
	c := cluster.Start(t, cluster.Options{ControllerManager: true, Aggregator: true})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/crd")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "create", "namespace", samplesNamespace)
	c.Kubectl(t, "apply", "--server-side", "-n", samplesNamespace, "-k", "../../"+samples)

	api, admin := freeAddr(t), freeAddr(t)
	_, adminPort, _ := net.SplitHostPort(admin)
	port, _ := strconv.Atoi(adminPort)
	adapter := startAdapter(t, c, port, samplesNamespace)
	c.RegisterMetricsAdapter(t, adapter.port)
	gw := gatewayPod()
	gw.Namespace = samplesNamespace
	c.AddRunningPod(t, gw, "127.0.0.1")
	pods := &inferencePods{stop: map[string]context.CancelFunc{}, model: sampleModel, seqs: sampleSeqsPerPod}
	c.RunPods(t, samplesNamespace, labels.SelectorFromSet(sampleLabels), pods.start)
	t.Cleanup(pods.stopAll)

	startManager(t, c, "http://"+admin+"/admin/usage")
	s := &selfHostedScene{c: c, configDir: t.TempDir()}
	volume := cluster.Projection{Secrets: controllers.ConfigSecretNames("sluice-gateway-config"), OptionalConfigMaps: controllers.RecordConfigMapNames("sluice-gateway-config")}
	c.MountProjected(t, samplesNamespace, volume, s.configDir, "config.yaml")
	s.g = startGatewayOn(t, filepath.Join(s.configDir, "config.yaml"), api, admin)

	d := cluster.Deployment("llama", sampleLabels, inferencePort)
	d.Spec.Replicas = ptr.To(replicas)
	if _, err := c.Clientset.AppsV1().Deployments(samplesNamespace).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the HPA at the end:\n%s", c.Kubectl(t, "describe", "hpa", "-n", samplesNamespace, "llama"))
		}
	})
	return s
}

// llama returns the self-hosted provider as the gateway's configuration has it now.
func (s *selfHostedScene) llama(t *testing.T) gatewayv1.Provider {
	t.Helper()
	cfg, err := gatewayv1.Load(filepath.Join(s.configDir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cfg.Providers {
		if p.Name == "llama" {
			return p
		}
	}
	t.Fatalf("the configuration has no provider llama")
	return gatewayv1.Provider{}
}

// llamaTraffic returns what the gateway has queued and in flight for llama now.
func (s *selfHostedScene) llamaTraffic(t *testing.T) gatewayv1.Traffic {
	t.Helper()
	for _, p := range s.g.usage(t).Providers {
		if p.Name == "llama" {
			return p.Traffic
		}
	}
	return gatewayv1.Traffic{}
}

// scaleFigures are the moments an e2e run measures, for its log; none is asserted.
type scaleFigures struct {
	start, queueRose, desired, ready, firstAnswer time.Time
}

// note records now in *at once, the first time cond holds.
func note(at *time.Time, cond bool) {
	if cond && at.IsZero() {
		*at = time.Now()
	}
}

func since(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "not seen"
	}
	return to.Sub(from).Round(100 * time.Millisecond).String()
}

// TestGatewayQueueScalesSelfHostedPods sends the sample tenant's calls through the gateway to
// the llama Pods and checks what the samples promise: the gateway calls each ready Pod itself and
// caps its calls in flight at ready Pods × GPUs × per-GPU concurrency; so the Pods' own queues
// stay empty and the demand waits in the gateway's queue; and the sample HPA, reading that queue
// as an external metric, grows the Deployment to its GPU quota, and back once the load stops.
func TestGatewayQueueScalesSelfHostedPods(t *testing.T) {
	s := startSelfHostedScene(t, "config/samples", 1)
	ctx := t.Context()
	// The load waits until the gateway has loaded the file that lists the Pod, as well as until the
	// file does: before that the gateway would not yet cap the Pod's calls.
	poll.Until(t, settle, "the gateway to call the first Pod", func() bool { return len(s.llama(t).Endpoints) == 1 && s.gatewayLoaded(t) })
	poll.Until(t, settle, "the HPA to read its metrics", func() bool {
		return len(hpaOf(t, ctx, s.c, samplesNamespace, "llama").Status.CurrentMetrics) > 0
	})

	load := startGatewayLoad(t, s.g, gatewayLoadCalls)
	f := scaleFigures{start: load.started}
	o := &loadSeen{caps: map[int]int64{}}
	poll.Until(t, settle, fmt.Sprintf("the Deployment to grow to %d ready Pods", sampleMaxReplicas), func() bool {
		traffic, p := o.see(t, ctx, s)
		h, d := hpaOf(t, ctx, s.c, samplesNamespace, "llama"), deploymentOf(t, ctx, s.c, samplesNamespace, "llama")
		if h.Status.DesiredReplicas > sampleMaxReplicas {
			t.Fatalf("the HPA wants %d replicas; want at most the GPU quota's %d", h.Status.DesiredReplicas, sampleMaxReplicas)
		}
		note(&f.queueRose, traffic.Queued > 0)
		note(&f.desired, h.Status.DesiredReplicas > 1)
		note(&f.ready, d.Status.ReadyReplicas == sampleMaxReplicas)
		return !f.ready.IsZero() && len(p.Endpoints) == sampleMaxReplicas
	})
	t.Logf("figures: load started; the gateway's queue rose after %s; the HPA wanted more replicas %s after that; all %d Pods were Ready %s after the queue rose",
		since(f.start, f.queueRose), since(f.queueRose, f.desired), sampleMaxReplicas, since(f.queueRose, f.ready))
	full := int64(sampleMaxReplicas * sampleSeqsPerPod)
	poll.Until(t, settle, fmt.Sprintf("the gateway to fill the %d Pods' %d calls in flight", sampleMaxReplicas, full), func() bool {
		traffic, _ := o.see(t, ctx, s)
		return traffic.InFlight >= full && o.waitingReads > 30
	})
	load.stop()
	t.Logf("load: %d calls answered, %d failed; the gateway queued at most %d and had at most %d in flight; the Pods reported at most %d waiting, in %d reads",
		load.answered.Load(), load.failed.Load(), o.maxQueued, o.maxInFlight, o.maxWaiting, o.waitingReads)

	for pods, limit := range o.caps {
		if limit != int64(pods*sampleSeqsPerPod) {
			t.Errorf("with %d ready Pods the gateway's maxInFlight was %d; want %d × 1 GPU × %d", pods, limit, pods, sampleSeqsPerPod)
		}
	}
	if o.maxInFlight > full {
		t.Errorf("the gateway had %d calls in flight; want never more than the %d Pods' %d", o.maxInFlight, sampleMaxReplicas, full)
	}
	// The design's tension: the gateway caps each Pod at what it runs at once, so no Pod queues;
	// the demand shows in the gateway's queue, which is why the HPA reads it.
	if o.maxQueued == 0 || o.maxWaiting != 0 {
		t.Errorf("the gateway queued at most %d and the Pods reported up to %d waiting; want a queue in the gateway and none in the Pods", o.maxQueued, o.maxWaiting)
	}
	if load.answered.Load() == 0 || load.failed.Load() != 0 {
		t.Errorf("%d calls answered, %d failed (the last: %v); want every call answered", load.answered.Load(), load.failed.Load(), ptr.Deref(load.lastFailure.Load(), ""))
	}

	poll.Until(t, settle, "the Deployment to shrink back to 1 Pod and the gateway to call only it", func() bool {
		d := deploymentOf(t, ctx, s.c, samplesNamespace, "llama")
		return *d.Spec.Replicas == 1 && d.Status.Replicas == 1 && len(s.llama(t).Endpoints) == 1
	})
}

// TestScaleFromZeroThroughTheGateway starts the samples of config/samples-scale-to-zero, whose
// HPA has minReplicas 0, with one idle llama Pod. The HPA scales the idle Deployment to 0 and the
// quota is paused; calls then wait in the gateway's queue, the HPA reads that queue and scales
// the Deployment from 0 to 1, the calls are answered by the new Pod, and once nothing is asked
// the Deployment goes back to 0. (Kubernetes scales from zero only a workload its HPA scaled to
// zero, as its ScaledToZero condition says: one a person set to 0 replicas stays there.)
func TestScaleFromZeroThroughTheGateway(t *testing.T) {
	s := startSelfHostedScene(t, "config/samples-scale-to-zero", 1)
	ctx := t.Context()
	s.waitScaledToZero(t, ctx, "the HPA to scale the idle Deployment to 0 and the quota to pause")

	const calls = 4
	f := scaleFigures{start: time.Now()}
	answers := make(chan answer, calls)
	var senders sync.WaitGroup
	for range calls {
		senders.Go(func() { answers <- s.g.post(t, "/v1/chat/completions", sampleTenantKey, sampleChat) })
	}
	var got []answer
	poll.Until(t, settle, "the calls to be answered", func() bool {
		d := deploymentOf(t, ctx, s.c, samplesNamespace, "llama")
		note(&f.queueRose, s.llamaTraffic(t).Queued > 0)
		note(&f.desired, hpaOf(t, ctx, s.c, samplesNamespace, "llama").Status.DesiredReplicas >= 1)
		note(&f.ready, d.Status.ReadyReplicas >= 1)
		for len(answers) > 0 {
			got = append(got, <-answers)
			note(&f.firstAnswer, true)
		}
		return len(got) == calls
	})
	senders.Wait()
	t.Logf("figures: from 0 replicas, the gateway's queue rose %s after the first call; the HPA wanted a replica %s after that; the Pod was Ready %s after the queue rose; the first answer came %s after the first call",
		since(f.start, f.queueRose), since(f.queueRose, f.desired), since(f.queueRose, f.ready), since(f.start, f.firstAnswer))
	for _, a := range got {
		if a.status != http.StatusOK {
			t.Errorf("a call sent at 0 replicas: %d %s; want 200 once a Pod was ready", a.status, a.body)
		}
	}

	s.waitScaledToZero(t, ctx, "the Deployment back to 0 replicas and the quota paused again")
}

// waitScaledToZero waits until the HPA has scaled llama to 0 replicas, says so, and reads the
// gateway's queue, and the gateway's configuration has paused the quota.
func (s *selfHostedScene) waitScaledToZero(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	poll.Until(t, settle, what, func() bool {
		d, h, p := deploymentOf(t, ctx, s.c, samplesNamespace, "llama"), hpaOf(t, ctx, s.c, samplesNamespace, "llama"), s.llama(t)
		return *d.Spec.Replicas == 0 && d.Status.Replicas == 0 && p.Paused && len(p.Endpoints) == 0 &&
			hasCondition(h, autoscalingv2.ScaledToZero, "ScaledToZero") && hasExternalMetric(h.Status.CurrentMetrics) &&
			s.gatewayLoaded(t)
	})
}

// gatewayLoaded reports whether the gateway has loaded the configuration as last written.
func (s *selfHostedScene) gatewayLoaded(t *testing.T) bool {
	t.Helper()
	info, err := os.Stat(filepath.Join(s.configDir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(s.g.metrics(t)) {
		if v, ok := strings.CutPrefix(line, "sluice_config_last_reload_success_timestamp_seconds "); ok {
			loaded, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && loaded >= float64(info.ModTime().UnixNano())/1e9
		}
	}
	return false
}

// loadSeen is the most the gateway and the Pods showed under load.
type loadSeen struct {
	caps                   map[int]int64 // the configuration's maxInFlight by its number of endpoints
	maxQueued, maxInFlight int64         // in the gateway
	maxWaiting             int64         // the most any Pod reported waiting, through the aggregator
	waitingReads           int           // the reads of the Pods' waiting requests that found a value
}

// see reads the gateway's traffic and configuration for llama, and the Pods' waiting requests.
func (o *loadSeen) see(t *testing.T, ctx context.Context, s *selfHostedScene) (gatewayv1.Traffic, gatewayv1.Provider) {
	traffic, p := s.llamaTraffic(t), s.llama(t)
	o.caps[len(p.Endpoints)] = p.MaxInFlight
	o.maxQueued, o.maxInFlight = max(o.maxQueued, traffic.Queued), max(o.maxInFlight, traffic.InFlight)
	if waiting, ok := mostWaiting(ctx, s.c); ok {
		o.maxWaiting = max(o.maxWaiting, waiting)
		o.waitingReads++
	}
	return traffic, p
}

// sampleChat is a call for the sample's self-hosted model.
var sampleChat = `{"model":"` + sampleModel + `","messages":[{"role":"user","content":"Summarise page one."}],"max_tokens":20}`

func hasExternalMetric(current []autoscalingv2.MetricStatus) bool {
	for _, m := range current {
		if m.External != nil && m.External.Metric.Name == metrics.QueueDepth {
			return true
		}
	}
	return false
}

// mostWaiting returns the most requests any llama Pod reports waiting, read through the
// aggregator; ok is false when no Pod reports.
func mostWaiting(ctx context.Context, c *cluster.Cluster) (most int64, ok bool) {
	values, err := podMetricValues(ctx, c, samplesNamespace, metrics.RequestsWaiting, sampleLabels)
	for _, v := range values {
		most = max(most, v.Value.Value())
	}
	return most, err == nil && len(values) > 0
}

// gatewayLoad keeps calls in flight through a gateway as the sample tenant, each answered or
// failed, until stopped or loadLimit.
type gatewayLoad struct {
	started          time.Time
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	answered, failed atomic.Int64
	lastFailure      atomic.Pointer[string]
}

func startGatewayLoad(t *testing.T, g *gateway, calls int) *gatewayLoad {
	ctx, cancel := context.WithTimeout(context.Background(), loadLimit)
	l := &gatewayLoad{started: time.Now(), cancel: cancel}
	for range calls {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				l.call(ctx, g)
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

func (l *gatewayLoad) call(ctx context.Context, g *gateway) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.api+"/v1/chat/completions", strings.NewReader(sampleChat))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+sampleTenantKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		l.fail(err.Error())
	case resp.StatusCode != http.StatusOK:
		l.fail(resp.Status)
	default:
		l.answered.Add(1)
	}
	if err == nil {
		resp.Body.Close()
	}
}

func (l *gatewayLoad) fail(why string) {
	l.failed.Add(1)
	l.lastFailure.Store(&why)
}

// stop ends the load and waits for it; stop may be called more than once.
func (l *gatewayLoad) stop() {
	l.cancel()
	l.wg.Wait()
}
