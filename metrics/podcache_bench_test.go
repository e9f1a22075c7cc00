package metrics

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cluster of BenchmarkPodCacheMemory: many Pods that no ProviderQuota
// selects, and a few that one does.
const (
	unselectedPods = 10_000
	selectedPods   = 10
	// createWorkers bounds the Pods created at once.
	createWorkers = 16
)

// BenchmarkPodCacheMemory measures, on a real API server with 10,000 Pods
// that no ProviderQuota selects and 10 that one does, the heap that a cache
// of every Pod (controller-runtime's, trimmed by TrimPod, as the adapter
// had) holds, against a PodCache's. heap-alloc-MiB and heap-inuse-MiB are
// the live heap after a collection with the cache filled, less before it.
// It creates the Pods first, which takes a minute or so; run it once:
//
//	go test -run '^$' -bench PodCacheMemory -benchtime 1x ./metrics/
func BenchmarkPodCacheMemory(b *testing.B) {
	tc := newTestCluster(b)
	tc.quota(b, "llama", map[string]string{"app": "llama"})
	createPods(b, tc, "llama", selectedPods)
	createPods(b, tc, "web", unselectedPods)

	b.Run("cache=every-pod", func(b *testing.B) {
		reportHeapHeld(b, func() (fill, stop func()) { return everyPodCache(b, tc) })
	})
	b.Run("cache=selected-pods", func(b *testing.B) {
		reportHeapHeld(b, func() (fill, stop func()) { return selectedPodCache(b, tc) })
	})
}

// createPods creates n Pods labelled app, a few at once, each as a
// Deployment's Pod would look.
func createPods(b *testing.B, tc *testCluster, app string, n int) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(createWorkers)
	for i := range n {
		g.Go(func() error {
			return tc.client.Create(context.Background(), deploymentPod(tc, app, i))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("create the Pods of %s: %v", app, err)
	}
}

func deploymentPod(tc *testCluster, app string, i int) *corev1.Pod {
	pod := tc.pod(fmt.Sprintf("%s-7d9f8c6b5-%05d", app, i), map[string]string{"app": app, "pod-template-hash": "7d9f8c6b5", "team": "platform"})
	pod.Annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODEL", Value: "meta-llama/Llama-3.1-8B-Instruct"}, {Name: "PORT", Value: "8000"}}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return pod
}

// reportHeapHeld reports, on average, the heap that filling a cache holds:
// build makes the cache, whose own cost is not counted, fill fills it, and
// stop stops it once measured.
func reportHeapHeld(b *testing.B, build func() (fill, stop func())) {
	var alloc, inuse float64
	for range b.N {
		fill, stop := build()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fill()
		runtime.GC()
		runtime.ReadMemStats(&after)
		stop()
		alloc += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
		inuse += float64(int64(after.HeapInuse) - int64(before.HeapInuse))
	}
	b.ReportMetric(alloc/float64(b.N)/(1<<20), "heap-alloc-MiB")
	b.ReportMetric(inuse/float64(b.N)/(1<<20), "heap-inuse-MiB")
}

// everyPodCache builds a controller-runtime cache of every Pod, as the
// adapter had; filling it starts its Pods' informer.
func everyPodCache(b *testing.B, tc *testCluster) (fill, stop func()) {
	b.Helper()
	pods, err := cache.New(tc.config, cache.Options{
		Scheme: tc.scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: TrimPod}},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = pods.Start(ctx) }()
	fill = func() {
		if _, err := pods.GetInformer(ctx, &corev1.Pod{}); err != nil { // blocks until filled
			b.Fatal(err)
		}
	}
	return fill, cancel
}

// selectedPodCache builds a PodCache as the adapter runs it: the gateways,
// the labelled Pods, and the ProviderQuota's.
func selectedPodCache(b *testing.B, tc *testCluster) (fill, stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := NewPodCache(PodCacheOptions{Client: tc.clientset, Quotas: tc.client, GatewaySelector: labels.SelectorFromSet(gatewayLabels), Interval: time.Minute})
	fill = func() {
		if err := pods.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		if n := len(tc.cachedNames(b, pods)); n != selectedPods {
			b.Fatalf("the Pod cache holds %d Pods of the namespace; want the %d selected", n, selectedPods)
		}
	}
	return fill, cancel
}
