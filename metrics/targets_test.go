package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

func TestTargets(t *testing.T) {
	quota := selfHosted("llama", "ai", map[string]string{"app": "llama"}, 8000, v1alpha1.EngineVLLM, 2)
	tests := []struct {
		name        string
		quotas      []v1alpha1.ProviderQuota
		pods        []corev1.Pod
		annotatedIn []string // nil means every namespace
		want        []Target
		wantErrs    int
	}{
		{
			name:   "a ProviderQuota's running Pods, on its port",
			quotas: []v1alpha1.ProviderQuota{quota},
			pods: []corev1.Pod{
				runningPod("ai", "llama-1", "10.0.0.1", map[string]string{"app": "llama"}, nil),
				runningPod("ai", "other", "10.0.0.2", map[string]string{"app": "other"}, nil),
				runningPod("elsewhere", "llama-2", "10.0.0.3", map[string]string{"app": "llama"}, nil),
			},
			want: []Target{target("ai", "llama-1", "http://10.0.0.1:8000/metrics", map[string]string{"app": "llama"}, v1alpha1.EngineVLLM, 2)},
		},
		{
			name:   "Pods starting, stopping or without an address are left out",
			quotas: []v1alpha1.ProviderQuota{quota},
			pods: []corev1.Pod{
				pending("ai", "llama-pending", map[string]string{"app": "llama"}),
				runningPod("ai", "llama-noip", "", map[string]string{"app": "llama"}, nil),
				deleting(runningPod("ai", "llama-deleting", "10.0.0.4", map[string]string{"app": "llama"}, nil)),
			},
		},
		{
			name:   "a hosted ProviderQuota selects nothing",
			quotas: []v1alpha1.ProviderQuota{{ObjectMeta: metav1.ObjectMeta{Name: "openai", Namespace: "ai"}, Spec: v1alpha1.ProviderQuotaSpec{BaseURL: "https://api.openai.com/v1"}}},
			pods:   []corev1.Pod{runningPod("ai", "llama-1", "10.0.0.1", map[string]string{"app": "llama"}, nil)},
		},
		{
			name: "labelled Pods, with the path and engine their annotations give; annotated alone is not enough",
			pods: []corev1.Pod{
				runningPod("ml", "tgi-0", "10.0.1.1", scrapeLabel, map[string]string{AnnotationPort: "3000", AnnotationPath: "/prom", AnnotationEngine: "tgi"}),
				runningPod("ml", "any-0", "fd00::1", scrapeLabel, map[string]string{AnnotationPort: "9090"}),
				runningPod("ml", "off-0", "10.0.1.3", map[string]string{LabelScrape: "false"}, map[string]string{AnnotationPort: "9090"}),
				runningPod("ml", "annotated-0", "10.0.1.4", nil, map[string]string{"sluice.dev/scrape": "true", AnnotationPort: "9090"}),
			},
			want: []Target{
				target("ml", "tgi-0", "http://10.0.1.1:3000/prom", scrapeLabel, v1alpha1.EngineTGI, 0),
				target("ml", "any-0", "http://[fd00::1]:9090/metrics", scrapeLabel, "", 0),
			},
		},
		{
			name:        "labelled Pods only in the namespaces chosen; a ProviderQuota's anywhere",
			quotas:      []v1alpha1.ProviderQuota{quota},
			annotatedIn: []string{"ml"},
			pods: []corev1.Pod{
				runningPod("ml", "tgi-0", "10.0.1.1", scrapeLabel, map[string]string{AnnotationPort: "3000"}),
				runningPod("web", "app-0", "10.0.2.1", scrapeLabel, map[string]string{AnnotationPort: "3000"}),
				runningPod("ai", "llama-1", "10.0.0.1", map[string]string{"app": "llama"}, nil),
			},
			want: []Target{
				target("ai", "llama-1", "http://10.0.0.1:8000/metrics", map[string]string{"app": "llama"}, v1alpha1.EngineVLLM, 2),
				target("ml", "tgi-0", "http://10.0.1.1:3000/metrics", scrapeLabel, "", 0),
			},
		},
		{
			name: "wrong annotations are reported, and the Pod left out",
			pods: []corev1.Pod{
				runningPod("ml", "noport", "10.0.1.1", scrapeLabel, nil),
				runningPod("ml", "badpath", "10.0.1.2", scrapeLabel, map[string]string{AnnotationPort: "80", AnnotationPath: "metrics"}),
				runningPod("ml", "badengine", "10.0.1.3", scrapeLabel, map[string]string{AnnotationPort: "80", AnnotationEngine: "ollama"}),
			},
			wantErrs: 3,
		},
		{
			name:   "a Pod both selected and labelled is scraped once, as the ProviderQuota says",
			quotas: []v1alpha1.ProviderQuota{quota},
			pods: []corev1.Pod{
				runningPod("ai", "llama-1", "10.0.0.1", map[string]string{"app": "llama", LabelScrape: "true"}, map[string]string{AnnotationPort: "9090"}),
			},
			want: []Target{target("ai", "llama-1", "http://10.0.0.1:8000/metrics", map[string]string{"app": "llama", LabelScrape: "true"}, v1alpha1.EngineVLLM, 2)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := Targets(tc.quotas, tc.pods, tc.annotatedIn)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Targets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, trimmedTargets(t, tc.quotas, tc.pods, tc.annotatedIn)); diff != "" {
				t.Errorf("Targets of the trimmed Pods differ (-untrimmed +trimmed):\n%s", diff)
			}
			if len(errs) != tc.wantErrs {
				t.Errorf("Targets reported %d errors %v; want %d", len(errs), errs, tc.wantErrs)
			}
		})
	}
}

// trimmedTargets returns the Targets of the Pods as the adapter's cache
// keeps them, trimmed, with a container, an unrelated annotation and
// managed fields added first, which trimming drops.
func trimmedTargets(t *testing.T, quotas []v1alpha1.ProviderQuota, pods []corev1.Pod, annotatedIn []string) []Target {
	t.Helper()
	trimmed := make([]corev1.Pod, len(pods))
	for i, pod := range pods {
		pod := *pod.DeepCopy()
		pod.Spec.Containers = []corev1.Container{{Name: "server", Image: "vllm/vllm-openai"}}
		pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		pod.Annotations = labels.Merge(pod.Annotations, map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"})
		out, err := TrimPod(&pod)
		if err != nil {
			t.Fatal(err)
		}
		trimmed[i] = *out.(*corev1.Pod)
		if len(trimmed[i].Spec.Containers) != 0 || trimmed[i].ManagedFields != nil || trimmed[i].Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
			t.Errorf("TrimPod(%s) kept %+v; want only what the adapter reads", pod.Name, trimmed[i])
		}
	}
	got, _ := Targets(quotas, trimmed, annotatedIn)
	return got
}

// scrapeLabel asks for a Pod to be scraped.
var scrapeLabel = map[string]string{LabelScrape: "true"}

func selfHosted(name, ns string, selector map[string]string, port int32, engine v1alpha1.Engine, gpus int32) v1alpha1.ProviderQuota {
	return v1alpha1.ProviderQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"tier": "gpu"}},
		Spec: v1alpha1.ProviderQuotaSpec{SelfHosted: &v1alpha1.SelfHosted{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Port:     port, Engine: engine, GPUsPerPod: gpus, MaxConcurrencyPerGPU: 16, GPUQuota: ptr.To[int32](8),
		}},
	}
}

func runningPod(ns, name, ip string, podLabels, annotations map[string]string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: podLabels, Annotations: annotations},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
}

func pending(ns, name string, podLabels map[string]string) corev1.Pod {
	pod := runningPod(ns, name, "", podLabels, nil)
	pod.Status.Phase = corev1.PodPending
	return pod
}

func deleting(pod corev1.Pod) corev1.Pod {
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	return pod
}

func target(ns, name, url string, podLabels map[string]string, engine v1alpha1.Engine, gpus int32) Target {
	return Target{Pod: types.NamespacedName{Namespace: ns, Name: name}, Labels: labels.Set(podLabels), URL: url, Engine: engine, GPUs: gpus}
}
