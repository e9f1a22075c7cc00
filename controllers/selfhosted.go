package controllers

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

// PodReady reports whether a Pod counts towards a self-hosted provider's
// capacity: its Ready condition is True and it is not being deleted.
func PodReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReadyPodIPs lists, for each self-hosted ProviderQuota, the addresses of the
// ready Pods of its namespace that its selector selects, in the order of the
// Pods' names. A ready Pod with no address yet is not listed: nothing could
// call it. A ProviderQuota whose selector is invalid lists none; compiling
// reports the selector.
func ReadyPodIPs(pqs []v1alpha1.ProviderQuota, pods []corev1.Pod) map[string][]string {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	ips := map[string][]string{}
	for i := range pqs {
		pq := &pqs[i]
		selector, ok := podSelector(pq)
		if !ok {
			continue
		}
		ips[pq.Name] = []string{}
		for j := range sorted {
			pod := &sorted[j]
			if pod.Namespace == pq.Namespace && selector.Matches(labels.Set(pod.Labels)) && PodReady(pod) && pod.Status.PodIP != "" {
				ips[pq.Name] = append(ips[pq.Name], pod.Status.PodIP)
			}
		}
	}
	return ips
}

// SelectedPodCounts counts, by self-hosted ProviderQuota name, the Pods of its
// namespace that its selector selects, ready or not, but for Pods stopping
// or ended: what tells a workload scaled to zero from one whose Pods are not
// ready yet.
func SelectedPodCounts(pqs []v1alpha1.ProviderQuota, pods []corev1.Pod) map[string]int32 {
	counts := map[string]int32{}
	for i := range pqs {
		pq := &pqs[i]
		selector, ok := podSelector(pq)
		if !ok {
			continue
		}
		counts[pq.Name] = 0
		for j := range pods {
			pod := &pods[j]
			if pod.Namespace == pq.Namespace && selector.Matches(labels.Set(pod.Labels)) && podLive(pod) {
				counts[pq.Name]++
			}
		}
	}
	return counts
}

// podLive reports whether a Pod is neither stopping nor ended.
func podLive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// podSelector returns a self-hosted ProviderQuota's Pod selector; ok is
// false for a hosted one, or for a selector that is empty or invalid.
func podSelector(pq *v1alpha1.ProviderQuota) (labels.Selector, bool) {
	sh := pq.Spec.SelfHosted
	if sh == nil {
		return nil, false
	}
	selector, err := metav1.LabelSelectorAsSelector(&sh.Selector)
	if err != nil || selector.Empty() {
		return nil, false
	}
	return selector, true
}

// hasSelfHosted reports whether any of the ProviderQuotas is self-hosted.
func hasSelfHosted(pqs []v1alpha1.ProviderQuota) bool {
	for i := range pqs {
		if pqs[i].Spec.SelfHosted != nil {
			return true
		}
	}
	return false
}

// podCapacityChanged passes the Pod events that may change the ready Pods a
// provider calls, or whether it selects any: a Pod created or deleted, its
// readiness, its address, its labels changed, or its stopping or ending.
// Status updates that leave them alone, the most frequent kind, pass no
// further.
var podCapacityChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Pod)
		after, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return PodReady(before) != PodReady(after) || before.Status.PodIP != after.Status.PodIP || !labels.Equals(before.Labels, after.Labels) ||
			podLive(before) != podLive(after)
	},
}

// TrimPod is a cache transform for Pods: it keeps what the operator reads of
// a Pod (its name, labels and deletion, its phase, addresses and conditions)
// and drops the rest, such as its spec, so that caching every Pod of the
// namespace costs little. Other objects pass unchanged.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs},
	}, nil
}

// selectedBySelfHosted reports whether any self-hosted ProviderQuota
// selects the Pod.
func selectedBySelfHosted(pqs []v1alpha1.ProviderQuota, pod client.Object) bool {
	for i := range pqs {
		selector, ok := podSelector(&pqs[i])
		if ok && selector.Matches(labels.Set(pod.GetLabels())) {
			return true
		}
	}
	return false
}
