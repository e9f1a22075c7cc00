package metrics

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

// LabelScrape set to "true" asks the adapter to scrape a Pod that no
// ProviderQuota selects, as the annotations below say. It is a label, not
// an annotation, so that the adapter watches only the Pods so labelled: the
// API server selects Pods by label, never by annotation.
const LabelScrape = "sluice.dev/scrape"

// The annotations that say how to scrape a Pod labelled LabelScrape.
const (
	// AnnotationPort is the port that serves the metrics; required.
	AnnotationPort = "sluice.dev/port"
	// AnnotationPath is the metrics' path. Absent means /metrics.
	AnnotationPath = "sluice.dev/path"
	// AnnotationEngine names the engine, as a ProviderQuota's engine does.
	// Absent means the engine is told from the metrics' names.
	AnnotationEngine = "sluice.dev/engine"
)

// annotationPrefix starts every annotation the adapter reads.
const annotationPrefix = "sluice.dev/"

// defaultPath is where engines serve their metrics.
const defaultPath = "/metrics"

// Target is one Pod to scrape.
type Target struct {
	// Pod names the Pod.
	Pod types.NamespacedName
	// Labels are the Pod's labels, which HPA selectors match.
	Labels labels.Set
	// URL is the Pod's metrics endpoint.
	URL string
	// Engine is the inference server the Pod runs. Empty means the engine
	// is told from the metrics' names.
	Engine v1alpha1.Engine
	// GPUs is the Pod's GPUs. Zero means unknown, and no per-GPU value.
	GPUs int32
}

// Targets returns the Pods to scrape: those each self-hosted ProviderQuota
// selects in its namespace, then those labelled LabelScrape that no
// ProviderQuota selects, in the namespaces annotatedIn lists (none means
// every namespace). Only running Pods with an address count. It also
// returns, for each ProviderQuota it could not use, why.
func Targets(quotas []v1alpha1.ProviderQuota, pods []corev1.Pod, annotatedIn []string) ([]Target, []error) {
	var out []Target
	var errs []error
	seen := map[types.NamespacedName]bool{}
	for i := range quotas {
		targets, err := quotaTargets(&quotas[i], pods)
		if err != nil {
			errs = append(errs, err)
		}
		for _, t := range targets {
			if !seen[t.Pod] {
				seen[t.Pod] = true
				out = append(out, t)
			}
		}
	}
	for i := range pods {
		pod := &pods[i]
		if seen[podName(pod)] || !scrapable(pod) || !labelled(pod, annotatedIn) {
			continue
		}
		t, err := annotatedTarget(pod)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	return out, errs
}

// quotaTargets returns the running Pods a self-hosted ProviderQuota selects.
func quotaTargets(pq *v1alpha1.ProviderQuota, pods []corev1.Pod) ([]Target, error) {
	selector, err := quotaSelector(pq)
	if selector == nil {
		return nil, err
	}
	sh := pq.Spec.SelfHosted
	gpus := max(sh.GPUsPerPod, 1) // the API's default
	var out []Target
	for i := range pods {
		pod := &pods[i]
		if pod.Namespace != pq.Namespace || !scrapable(pod) || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, newTarget(pod, sh.Port, defaultPath, sh.Engine, gpus))
	}
	return out, nil
}

// quotaSelector returns the selector of a self-hosted ProviderQuota's Pods,
// or nil for a hosted one or a selector that cannot be used, with why.
func quotaSelector(pq *v1alpha1.ProviderQuota) (labels.Selector, error) {
	sh := pq.Spec.SelfHosted
	if sh == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(&sh.Selector)
	if err != nil {
		return nil, fmt.Errorf("metrics: ProviderQuota %s/%s: selector: %w", pq.Namespace, pq.Name, err)
	}
	if selector.Empty() { // the API refuses it; an empty selector would select every Pod
		return nil, fmt.Errorf("metrics: ProviderQuota %s/%s: selector is empty", pq.Namespace, pq.Name)
	}
	return selector, nil
}

// labelled reports whether a Pod asks to be scraped, in a namespace whose
// labelled Pods are scraped (no namespaces means every one).
func labelled(pod *corev1.Pod, namespaces []string) bool {
	return pod.Labels[LabelScrape] == "true" && (len(namespaces) == 0 || slices.Contains(namespaces, pod.Namespace))
}

// TrimPod keeps of a Pod only what the adapter reads (its name, labels,
// Sluice's annotations, phase, address and deletion), for the informers'
// TransformFunc.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone of a deleted Pod, passed through
	}
	trimmed := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, Annotations: sluiceAnnotations(pod.Annotations), DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP},
	}
	return trimmed, nil
}

// sluiceAnnotations returns the annotations of Sluice's own prefix, or nil.
func sluiceAnnotations(all map[string]string) map[string]string {
	var out map[string]string
	for k, v := range all {
		if strings.HasPrefix(k, annotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// annotatedTarget reads a Pod's scrape annotations.
func annotatedTarget(pod *corev1.Pod) (Target, error) {
	port, err := strconv.ParseInt(pod.Annotations[AnnotationPort], 10, 32)
	if err != nil || port < 1 || port > 65535 {
		return Target{}, fmt.Errorf("metrics: Pod %s/%s: annotation %s must be a port number, 1 to 65535", pod.Namespace, pod.Name, AnnotationPort)
	}
	path := pod.Annotations[AnnotationPath]
	if path == "" {
		path = defaultPath
	}
	if !strings.HasPrefix(path, "/") {
		return Target{}, fmt.Errorf("metrics: Pod %s/%s: annotation %s must be a path starting with /", pod.Namespace, pod.Name, AnnotationPath)
	}
	engine := v1alpha1.Engine(pod.Annotations[AnnotationEngine])
	if engine != "" && !knownEngine(engine) {
		return Target{}, fmt.Errorf("metrics: Pod %s/%s: annotation %s names no known engine: %q", pod.Namespace, pod.Name, AnnotationEngine, engine)
	}
	return newTarget(pod, int32(port), path, engine, 0), nil
}

func newTarget(pod *corev1.Pod, port int32, path string, engine v1alpha1.Engine, gpus int32) Target {
	return Target{
		Pod:    podName(pod),
		Labels: labels.Set(pod.Labels),
		URL:    "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))) + path,
		Engine: engine,
		GPUs:   gpus,
	}
}

// scrapable reports whether a Pod runs and has an address: a Pod that is
// starting or stopping has nothing to report yet, or any more.
func scrapable(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.DeletionTimestamp == nil
}

func podName(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}
