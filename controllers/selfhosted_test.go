package controllers

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// selfHosted returns a self-hosted ProviderQuota serving model from the Pods
// labelled app=name, created minutes after epoch.
func selfHosted(name string, minutes int, model string, gpusPerPod, perGPU int32, gpuQuota *int32) v1alpha1.ProviderQuota {
	return v1alpha1.ProviderQuota{
		ObjectMeta: objectMeta(name, minutes),
		Spec: v1alpha1.ProviderQuotaSpec{
			SelfHosted: &v1alpha1.SelfHosted{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Port:     8000, Engine: v1alpha1.EngineVLLM,
				GPUsPerPod: gpusPerPod, MaxConcurrencyPerGPU: perGPU, GPUQuota: gpuQuota,
			},
			Models: []v1alpha1.Model{{Name: model}},
		},
	}
}

func TestCompileSelfHosted(t *testing.T) {
	withLimit := func(pq v1alpha1.ProviderQuota, maxInFlight int64, headroom int32) v1alpha1.ProviderQuota {
		c := pq.DeepCopy()
		c.Spec.Limits = &v1alpha1.ProviderLimits{MaxInFlight: maxInFlight}
		c.Spec.HeadroomPercent = headroom
		return *c
	}
	llama := selfHosted("llama", 0, "llama-3", 2, 8, nil)
	tests := []struct {
		name          string
		pq            v1alpha1.ProviderQuota
		readyPods     map[string][]string
		selectedPods  map[string]int32
		wantInFlight  int64 // in config.yaml
		wantPaused    bool
		wantEffective int64 // in status, after headroom
		wantPods      int32
		wantGPUs      int32
		wantActive    string // the Active condition's reason; Ready is Compiled whatever the Pods
		wantMessage   string
	}{{
		name: "ready Pods × GPUs per Pod × per-GPU cap", pq: llama, readyPods: map[string][]string{"llama": podIPs(3)},
		wantInFlight: 48, wantEffective: 48, wantPods: 3, wantGPUs: 6, wantActive: v1alpha1.ReasonPodsReady,
		wantMessage: "3 Pods ready with 6 GPUs: at most 48 calls in flight.",
	}, {
		name: "no ready Pod pauses the provider, for a cap of 0 would mean unlimited", pq: llama, readyPods: map[string][]string{"llama": podIPs(0)},
		selectedPods: map[string]int32{"llama": 2},
		wantPaused:   true, wantActive: v1alpha1.ReasonNoReadyPods, wantMessage: "No selected Pod is ready (2 Pods selected)",
	}, {
		name: "no Pod selected at all is a workload scaled to zero", pq: llama, readyPods: map[string][]string{"llama": podIPs(0)},
		selectedPods: map[string]int32{"llama": 0},
		wantPaused:   true, wantActive: v1alpha1.ReasonScaledToZero, wantMessage: "scaled to zero",
	}, {
		name: "a self-hosted provider missing from the counts selects no Pod", pq: llama,
		wantPaused: true, wantActive: v1alpha1.ReasonScaledToZero,
	}, {
		name: "the GPU quota caps the GPUs counted", pq: selfHosted("llama", 0, "llama-3", 2, 8, ptrTo[int32](4)), readyPods: map[string][]string{"llama": podIPs(3)},
		wantInFlight: 32, wantEffective: 32, wantPods: 3, wantGPUs: 4, wantActive: v1alpha1.ReasonPodsReady,
	}, {
		name: "gpusPerPod defaults to 1", pq: selfHosted("llama", 0, "llama-3", 0, 8, nil), readyPods: map[string][]string{"llama": podIPs(2)},
		wantInFlight: 16, wantEffective: 16, wantPods: 2, wantGPUs: 2, wantActive: v1alpha1.ReasonPodsReady,
	}, {
		name: "limits.maxInFlight caps the Pods' capacity, and headroom applies", pq: withLimit(llama, 20, 50), readyPods: map[string][]string{"llama": podIPs(3)},
		wantInFlight: 20, wantEffective: 10, wantPods: 3, wantGPUs: 6, wantActive: v1alpha1.ReasonPodsReady,
		wantMessage: "at most 10 calls in flight",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pro := plan("pro", 0, []string{"acme"}, []string{"llama"})
			out, err := Compile(Inputs{
				ProviderQuotas: []v1alpha1.ProviderQuota{tc.pq}, TenantPlans: []v1alpha1.TenantPlan{pro},
				Secrets: []corev1.Secret{keySecret("acme-alice", "acme", "alice", "sk-acme-alice-0123456789abcdef0123456789abcdef")}, ReadyPods: tc.readyPods,
				SelectedPods: tc.selectedPods,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Config.Providers) != 1 {
				t.Fatalf("providers = %v; want llama, paused or not", providerNames(out.Config))
			}
			p := out.Config.Providers[0]
			if p.MaxInFlight != tc.wantInFlight || p.Paused != tc.wantPaused {
				t.Errorf("config.yaml has maxInFlight %d, paused %v; want %d, %v", p.MaxInFlight, p.Paused, tc.wantInFlight, tc.wantPaused)
			}
			// The gateways call the ready Pods themselves, at their addresses on the quota's port.
			if want := podEndpoints(tc.readyPods["llama"], 8000); p.BaseURL != "" || !slices.Equal(p.Endpoints, want) {
				t.Errorf("config.yaml has baseURL %q, endpoints %v; want no baseURL, endpoints %v", p.BaseURL, p.Endpoints, want)
			}
			res := out.ProviderQuotas["llama"]
			if res.Reason != v1alpha1.ReasonCompiled {
				t.Errorf("result %s %q; want Compiled whether or not a Pod is ready", res.Reason, res.Message)
			}
			if res.Active == nil || res.Active.Reason != tc.wantActive || !strings.Contains(res.Active.Message, tc.wantMessage) {
				t.Errorf("active %+v; want %s containing %q", res.Active, tc.wantActive, tc.wantMessage)
			}
			if res.EffectiveLimits == nil || res.EffectiveLimits.MaxInFlight != tc.wantEffective {
				t.Errorf("effective limits %+v; want maxInFlight %d", res.EffectiveLimits, tc.wantEffective)
			}
			if res.ReadyPods == nil || res.ReadyGPUs == nil || *res.ReadyPods != tc.wantPods || *res.ReadyGPUs != tc.wantGPUs {
				t.Errorf("ready Pods %v, GPUs %v; want %d, %d", res.ReadyPods, res.ReadyGPUs, tc.wantPods, tc.wantGPUs)
			}
			// A plan naming the provider compiles whether or not a Pod is ready: its calls
			// wait in the queue rather than being refused as an unknown model.
			if got := out.TenantPlans["pro"].Reason; got != v1alpha1.ReasonCompiled {
				t.Errorf("plan pro: %s %q; want Compiled", got, out.TenantPlans["pro"].Message)
			}
		})
	}
}

func TestCompileSelfHostedInvalidSelector(t *testing.T) {
	pq := selfHosted("llama", 0, "llama-3", 1, 8, nil)
	pq.Spec.SelfHosted.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
	out, err := Compile(Inputs{ProviderQuotas: []v1alpha1.ProviderQuota{pq}})
	if err != nil {
		t.Fatal(err)
	}
	if res := out.ProviderQuotas["llama"]; res.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(res.Message, "spec.selfHosted.selector: Invalid value") {
		t.Errorf("result %s %q; want InvalidSpec naming spec.selfHosted.selector", res.Reason, res.Message)
	}
	if len(out.Config.Providers) != 0 {
		t.Errorf("providers = %v; want none", providerNames(out.Config))
	}
}

// podIPs returns n Pod addresses.
func podIPs(n int) []string {
	ips := []string{}
	for i := range n {
		ips = append(ips, fmt.Sprintf("10.0.0.%d", i+1))
	}
	return ips
}

// podIP is the address the tests give the Pod of that name.
func podIP(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	n := h.Sum32()
	return fmt.Sprintf("10.1.%d.%d", n>>8%256, n%254+1)
}

// pod returns a Pod of namespace ns with labels app=app, ready or not, at an address of its own.
func pod(ns, name, app string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "inference"}}},
		Status:     corev1.PodStatus{PodIP: podIP(name), Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestReadyPodIPs(t *testing.T) {
	deleting := pod(testNamespace, "deleting", "llama", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: epoch}
	noCondition := pod(testNamespace, "starting", "llama", true)
	noCondition.Status.Conditions = nil
	noAddress := pod(testNamespace, "starting", "llama", true)
	noAddress.Status.PodIP = ""
	pods := []corev1.Pod{
		pod(testNamespace, "b", "llama", true),
		pod(testNamespace, "a", "llama", true),
		pod(testNamespace, "c", "llama", false),
		deleting, noCondition, noAddress,
		pod("elsewhere", "d", "llama", true),
		pod(testNamespace, "e", "mistral", true),
	}
	pqs := []v1alpha1.ProviderQuota{
		selfHosted("llama", 0, "llama-3", 1, 8, nil),
		selfHosted("qwen", 0, "qwen", 1, 8, nil),
		quota("openai", 0, "gpt-4o"),
	}
	got := ReadyPodIPs(pqs, pods)
	if diff := cmp.Diff(map[string][]string{"llama": {podIP("a"), podIP("b")}, "qwen": {}}, got); diff != "" {
		t.Errorf("ready Pods (-want +got):\n%s", diff)
	}
}

func TestTrimPod(t *testing.T) {
	p := pod(testNamespace, "a", "llama", true)
	p.Spec.Containers[0].Args = []string{"--model", "llama"}
	p.Annotations = map[string]string{"big": strings.Repeat("x", 1000)}
	p.Status.PodIP = "10.0.0.1"
	trimmed, err := TrimPod(&p)
	if err != nil {
		t.Fatal(err)
	}
	tp := trimmed.(*corev1.Pod)
	if len(tp.Spec.Containers) != 0 || tp.Annotations != nil {
		t.Errorf("the trimmed Pod keeps its spec or annotations: %+v", tp)
	}
	if !PodReady(tp) || tp.Labels["app"] != "llama" || tp.Status.PodIP != "10.0.0.1" || tp.Name != "a" {
		t.Errorf("the trimmed Pod lost what the operator reads: %+v", tp)
	}
}

// TestSelfHostedPods runs the reconciler in a manager, with the Pod cache
// trimmed as cmd/manager does, on a real API server: as the selected Pods
// become ready, unready and deleted, the in-flight cap in the configuration
// Secret and the ProviderQuota's status follow, and Pods no ProviderQuota
// selects change nothing.
func TestSelfHostedPods(t *testing.T) {
	c, ns := newNamespace(t)
	mgr, err := ctrl.NewManager(startAPIServer(t), ctrl.Options{
		Scheme: testScheme(t),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{ns: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: TrimPod}},
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	events := &recorder{}
	r := &GatewayConfigReconciler{Client: mgr.GetClient(), Recorder: events, SecretName: configSecretName}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	llama := selfHosted("llama", 0, "llama-3", 2, 8, ptrTo[int32](4))
	pro := plan("pro", 0, []string{"acme"}, []string{"llama"})
	create(t, c, ns, &llama, &pro, ptrTo(keySecret("acme-alice", "acme", "alice", aliceKey)))
	waitCapacity(t, c, ns, "no Pod yet", 0, 0, 0, v1alpha1.ReasonScaledToZero)

	a, b, other := pod(ns, "llama-a", "llama", false), pod(ns, "llama-b", "llama", false), pod(ns, "mistral", "mistral", false)
	create(t, c, ns, &a, &b, &other)
	waitCapacity(t, c, ns, "two Pods starting", 0, 0, 0, v1alpha1.ReasonNoReadyPods)
	setReady(t, c, &a, true)
	waitCapacity(t, c, ns, "one ready Pod", 1, 2, 16, v1alpha1.ReasonPodsReady)
	setReady(t, c, &b, true)
	waitCapacity(t, c, ns, "two ready Pods", 2, 4, 32, v1alpha1.ReasonPodsReady)

	// The quota of four GPUs caps a third Pod's.
	extra := pod(ns, "llama-c", "llama", false)
	create(t, c, ns, &extra)
	setReady(t, c, &extra, true)
	waitCapacity(t, c, ns, "three ready Pods within the GPU quota", 3, 4, 32, v1alpha1.ReasonPodsReady)
	if err := c.Delete(ctx, &extra); err != nil {
		t.Fatal(err)
	}

	setReady(t, c, &a, false)
	waitCapacity(t, c, ns, "Pod a unready", 1, 2, 16, v1alpha1.ReasonPodsReady)
	// A Pod no ProviderQuota selects is no input.
	setReady(t, c, &other, true)
	if err := c.Delete(ctx, &b); err != nil {
		t.Fatal(err)
	}
	waitCapacity(t, c, ns, "every Pod unready or deleted", 0, 0, 0, v1alpha1.ReasonNoReadyPods)

	var got v1alpha1.TenantPlan
	get(t, c, ns, "pro", &got)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("plan pro's conditions %+v; want Ready while its provider has no Pod", got.Status.Conditions)
	}
	for _, want := range []string{"Normal ScaledToZero", "Normal NoReadyPods", "Normal PodsReady", "Normal Compiled"} {
		if !strings.Contains(events.all(), want) {
			t.Errorf("events:\n%s\nwant %q", events.all(), want)
		}
	}
	assertNoSecretsOutside(t, c, ns, events.all())
}

// setReady sets a Pod's Ready condition through the status subresource, as
// a kubelet does.
func setReady(t *testing.T, c client.Client, p *corev1.Pod, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP = podIP(p.Name)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(context.Background(), p); err != nil {
		t.Fatalf("set Pod %s ready=%v: %v", p.Name, ready, err)
	}
}

// waitCapacity waits until the configuration Secret caps llama at
// maxInFlight calls in flight (paused at 0) and its status shows the ready
// Pods and GPUs and the Ready reason.
func waitCapacity(t *testing.T, c client.Client, ns, what string, pods, gpus int32, maxInFlight int64, active string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s corev1.Secret
		var pq v1alpha1.ProviderQuota
		errS := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: configSecretName}, &s)
		errQ := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "llama"}, &pq)
		if errS == nil && errQ == nil {
			cfg, err := gatewayv1.Parse(s.Data[ConfigFile])
			st := pq.Status
			ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			act := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionActive)
			if err == nil && len(cfg.Providers) == 1 && ready != nil && act != nil && st.ReadyPods != nil && st.ReadyGPUs != nil {
				p := cfg.Providers[0]
				if p.MaxInFlight == maxInFlight && p.Paused == (maxInFlight == 0) &&
					*st.ReadyPods == pods && *st.ReadyGPUs == gpus && ready.Reason == v1alpha1.ReasonCompiled && act.Reason == active {
					return
				}
				last = formatCapacity(p, st, act)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: want %d Pods, %d GPUs, maxInFlight %d, Ready and Active %s; last saw %s", what, pods, gpus, maxInFlight, active, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func formatCapacity(p gatewayv1.Provider, st v1alpha1.ProviderQuotaStatus, active *metav1.Condition) string {
	return fmt.Sprintf("maxInFlight %d, paused %v, readyPods %d, readyGPUs %d, Active %s: %s",
		p.MaxInFlight, p.Paused, *st.ReadyPods, *st.ReadyGPUs, active.Reason, active.Message)
}
