package metrics

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// apiServer is the kube-apiserver, with the CRDs installed, that the Pod
// cache's tests share; each test works in a namespace of its own.
var apiServer = &cluster.Shared{CRDs: "../config/crd/bases"}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "metrics: stop kube-apiserver: %v\n", err)
	}
	os.Exit(code)
}

// gatewayLabels label the gateway Pods in these tests.
var gatewayLabels = labels.Set{"app.kubernetes.io/name": "sluice-gateway"}

// testCluster is a client of the shared API server and a namespace of the
// test's own.
type testCluster struct {
	config    *rest.Config
	scheme    *runtime.Scheme
	client    client.Client
	clientset kubernetes.Interface
	namespace string
}

var namespaces atomic.Int64

func newTestCluster(t testing.TB) *testCluster {
	t.Helper()
	cfg := apiServer.Config(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-%d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), namespaces.Add(1))
	name = strings.Trim(name[max(0, len(name)-63):], "-")
	tc := &testCluster{config: cfg, scheme: scheme, client: c, clientset: clientset, namespace: name}
	tc.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return tc
}

func (tc *testCluster) create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := tc.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// quota creates a self-hosted ProviderQuota of the test's namespace that
// selects podLabels.
func (tc *testCluster) quota(t testing.TB, name string, podLabels map[string]string) v1alpha1.ProviderQuota {
	t.Helper()
	pq := selfHosted(name, tc.namespace, podLabels, 8000, v1alpha1.EngineVLLM, 1)
	pq.Spec.Models = []v1alpha1.Model{{Name: name}}
	tc.create(t, &pq)
	return pq
}

// pod is a Pod of the test's namespace, as the API server accepts it.
func (tc *testCluster) pod(name string, podLabels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tc.namespace, Labels: podLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai"}}},
	}
}

// cachedNames lists the names of the cached Pods of the test's namespace.
func (tc *testCluster) cachedNames(t testing.TB, pods *PodCache) []string {
	t.Helper()
	var list corev1.PodList
	if err := pods.List(context.Background(), &list, client.InNamespace(tc.namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pod := range list.Items {
		out = append(out, pod.Name)
	}
	return out
}

func refresh(t testing.TB, pods *PodCache) {
	t.Helper()
	if err := pods.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestPodCacheHoldsOnlyThePodsItCanUse runs a Pod cache on a real API
// server: it holds a ProviderQuota's Pods, the gateways and the labelled
// Pods, each once, and no other Pod; an annotated one is named in a warning.
func TestPodCacheHoldsOnlyThePodsItCanUse(t *testing.T) {
	tc := newTestCluster(t)
	tc.quota(t, "llama", map[string]string{"app": "llama"})
	for _, pod := range []*corev1.Pod{
		tc.pod("llama-0", map[string]string{"app": "llama"}),
		tc.pod("gateway-0", gatewayLabels),
		tc.pod("labelled-0", map[string]string{"app": "tgi", LabelScrape: "true"}),
		tc.pod("both-0", map[string]string{"app": "llama", LabelScrape: "true"}),
		tc.pod("web-0", map[string]string{"app": "web"}),
	} {
		tc.create(t, pod)
	}
	annotated := tc.pod("annotated-0", map[string]string{"app": "tgi"})
	annotated.Annotations = map[string]string{"sluice.dev/scrape": "true", AnnotationPort: "3000"}
	tc.create(t, annotated)
	pods := NewPodCache(PodCacheOptions{
		Client: tc.clientset, Quotas: tc.client, GatewaySelector: labels.SelectorFromSet(gatewayLabels),
		AnnotatedNamespaces: []string{tc.namespace}, Interval: time.Minute,
	})

	refresh(t, pods)

	if diff := cmp.Diff([]string{"both-0", "gateway-0", "labelled-0", "llama-0"}, tc.cachedNames(t, pods)); diff != "" {
		t.Errorf("cached Pods (-want +got):\n%s", diff)
	}
	var gateways corev1.PodList
	if err := pods.List(t.Context(), &gateways, client.InNamespace(tc.namespace), client.MatchingLabels(gatewayLabels)); err != nil || len(gateways.Items) != 1 {
		t.Errorf("List of the gateways = %d Pods, %v; want gateway-0", len(gateways.Items), err)
	}
	var got corev1.Pod
	if err := pods.Get(t.Context(), client.ObjectKey{Namespace: tc.namespace, Name: "llama-0"}, &got); err != nil || len(got.Spec.Containers) != 0 {
		t.Errorf("Get(llama-0) = %+v, %v; want the Pod, trimmed", got, err)
	}
	if err := pods.Get(t.Context(), client.ObjectKey{Namespace: tc.namespace, Name: "web-0"}, &got); !apierrors.IsNotFound(err) {
		t.Errorf("Get(web-0) = %v; want not found", err)
	}

	unlabelled, err := pods.unlabelled(t.Context())
	if diff := cmp.Diff([]types.NamespacedName{{Namespace: tc.namespace, Name: "annotated-0"}}, unlabelled); err != nil || diff != "" {
		t.Errorf("Pods annotated and not labelled (-want +got), %v:\n%s", err, diff)
	}

	// A Pod that comes later is seen by the watch.
	tc.create(t, tc.pod("llama-1", map[string]string{"app": "llama"}))
	poll.Until(t, time.Minute, "llama-1 in the cache", func() bool {
		return pods.Get(t.Context(), client.ObjectKey{Namespace: tc.namespace, Name: "llama-1"}, &got) == nil
	})
}

// TestPodCacheFollowsProviderQuotas checks that a ProviderQuota whose
// selector changes has its new Pods cached and its old ones dropped, and
// that one deleted takes its Pods and its informer with it.
func TestPodCacheFollowsProviderQuotas(t *testing.T) {
	tc := newTestCluster(t)
	quota := tc.quota(t, "llama", map[string]string{"app": "llama"})
	tc.create(t, tc.pod("llama-0", map[string]string{"app": "llama"}))
	tc.create(t, tc.pod("mistral-0", map[string]string{"app": "mistral"}))
	// Labelled Pods only elsewhere, so that the ProviderQuota's informer is
	// the only one that watches this namespace.
	pods := NewPodCache(PodCacheOptions{Client: tc.clientset, Quotas: tc.client, AnnotatedNamespaces: []string{"elsewhere"}, Interval: time.Minute})

	refresh(t, pods)
	if diff := cmp.Diff([]string{"llama-0"}, tc.cachedNames(t, pods)); diff != "" {
		t.Errorf("cached Pods (-want +got):\n%s", diff)
	}

	quota.Spec.SelfHosted.Selector.MatchLabels = map[string]string{"app": "mistral"}
	if err := tc.client.Update(t.Context(), &quota); err != nil {
		t.Fatal(err)
	}
	refresh(t, pods)
	if diff := cmp.Diff([]string{"mistral-0"}, tc.cachedNames(t, pods)); diff != "" {
		t.Errorf("cached Pods after the selector changed (-want +got):\n%s", diff)
	}
	if got := watched(pods, tc.namespace); len(got) != 1 || got[0].selector != "app=mistral" {
		t.Errorf("selections watched in %s = %v; want only app=mistral", tc.namespace, got)
	}

	if err := tc.client.Delete(t.Context(), &quota); err != nil {
		t.Fatal(err)
	}
	refresh(t, pods)
	if got := tc.cachedNames(t, pods); len(got) != 0 {
		t.Errorf("cached Pods after the ProviderQuota went = %v; want none", got)
	}
	if got := watched(pods, tc.namespace); len(got) != 0 {
		t.Errorf("selections watched in %s = %v; want none", tc.namespace, got)
	}
}

// watched returns the selections of a namespace that have an informer.
func watched(pods *PodCache, namespace string) []selection {
	pods.mu.RLock()
	defer pods.mu.RUnlock()
	var out []selection
	for s := range pods.informers {
		if s.namespace == namespace {
			out = append(out, s)
		}
	}
	return out
}
