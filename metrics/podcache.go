package metrics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluicehq/sluice/api/v1alpha1"
)

// PodCacheOptions configure a PodCache. Client and Quotas are required.
type PodCacheOptions struct {
	// Client lists and watches the Pods.
	Client kubernetes.Interface
	// Quotas lists the ProviderQuotas, whose selectors say which Pods to
	// watch; in the adapter, an informer cache.
	Quotas client.Reader
	// GatewaySelector selects the gateway Pods, in every namespace. Nil
	// means none.
	GatewaySelector labels.Selector
	// AnnotatedNamespaces are the namespaces whose Pods labelled
	// LabelScrape are watched. None means every namespace.
	AnnotatedNamespaces []string
	// Interval is the time between looks at the ProviderQuotas, and the
	// longest Refresh waits for new informers to fill. Zero means
	// DefaultInterval.
	Interval time.Duration
}

// PodCache holds, trimmed by TrimPod, only the Pods the adapter can use:
// those the self-hosted ProviderQuotas select, the gateways, and those
// labelled LabelScrape. Each distinct namespace and label selector has an
// informer of its own, so the API server sends no other Pod; Refresh
// starts and stops them as ProviderQuotas come, change and go. It reads
// Pods as a client.Reader does, each once however many selectors match it.
// It is safe for concurrent use.
type PodCache struct {
	client      kubernetes.Interface
	quotas      client.Reader
	fixed       []selection // the gateways' and the labelled Pods'
	annotatedIn []string    // none means every namespace
	interval    time.Duration

	mu        sync.RWMutex
	informers map[selection]*podInformer
}

var _ client.Reader = (*PodCache)(nil)

// selection is the Pods of one namespace ("" means every one) that match
// one label selector, in its canonical string form.
type selection struct {
	namespace, selector string
}

// podInformer watches the Pods of one selection until stop is called.
type podInformer struct {
	toolscache.SharedIndexInformer
	stop context.CancelFunc
}

// NewPodCache returns a PodCache that watches the gateways and the
// labelled Pods from its first Refresh, and no ProviderQuota's Pods until
// a Refresh finds the ProviderQuota.
func NewPodCache(opts PodCacheOptions) *PodCache {
	return &PodCache{
		client:      opts.Client,
		quotas:      opts.Quotas,
		fixed:       fixedSelections(opts.GatewaySelector, opts.AnnotatedNamespaces),
		annotatedIn: opts.AnnotatedNamespaces,
		interval:    cmpOr(opts.Interval, DefaultInterval),
		informers:   map[selection]*podInformer{},
	}
}

// fixedSelections are the selections that no ProviderQuota decides: the
// gateways in every namespace, and the Pods labelled LabelScrape in the
// namespaces given, or in every one.
func fixedSelections(gatewaySelector labels.Selector, annotatedIn []string) []selection {
	var out []selection
	if gatewaySelector != nil {
		out = append(out, selection{selector: gatewaySelector.String()})
	}
	scrape := labels.SelectorFromSet(labels.Set{LabelScrape: "true"}).String()
	if len(annotatedIn) == 0 {
		return append(out, selection{selector: scrape})
	}
	for _, ns := range annotatedIn {
		out = append(out, selection{namespace: ns, selector: scrape})
	}
	return out
}

// Run refreshes the informers at once and then every interval, until ctx
// is done; the informers stop with it. Meanwhile it warns, once, of the
// Pods annotated but not labelled for scraping.
func (c *PodCache) Run(ctx context.Context) {
	go c.warnUnlabelled(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Refresh(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "The Pods to scrape are not all watched yet")
		}
	}, c.interval)
}

// Refresh lists the ProviderQuotas, starts an informer for each selection
// that has none, stops those no longer wanted, and waits, at most one
// interval, for every informer to fill. The informers it starts run until
// ctx is done. Without the ProviderQuota CRD, only the gateways and the
// labelled Pods are watched.
func (c *PodCache) Refresh(ctx context.Context) error {
	var quotas v1alpha1.ProviderQuotaList
	if err := c.quotas.List(ctx, &quotas); err != nil && !apimeta.IsNoMatchError(err) {
		return fmt.Errorf("metrics: list ProviderQuotas: %w", err)
	}
	synced := c.follow(ctx, c.wanted(quotas.Items))
	waitCtx, cancel := context.WithTimeout(ctx, c.interval)
	defer cancel()
	if !toolscache.WaitForCacheSync(waitCtx.Done(), synced...) {
		return fmt.Errorf("metrics: the Pods of some selectors are not listed within %s", c.interval)
	}
	return nil
}

// warnUnlabelled logs the Pods that ask to be scraped by the annotation
// LabelScrape, as earlier versions read it, without the label.
func (c *PodCache) warnUnlabelled(ctx context.Context) {
	log := klog.FromContext(ctx)
	pods, err := c.unlabelled(ctx)
	if err != nil {
		log.Error(err, "Cannot look for Pods annotated but not labelled "+LabelScrape)
	}
	if len(pods) > 0 {
		log.Info("Pods annotated "+LabelScrape+" are scraped only if labelled "+LabelScrape+"=true; these are not",
			"count", len(pods), "pods", pods[:min(len(pods), maxUnlabelledLogged)])
	}
}

// maxUnlabelledLogged is the most Pods warnUnlabelled names.
const maxUnlabelledLogged = 20

// unlabelled pages once through the Pods of the namespaces whose labelled
// Pods are scraped, and returns those annotated LabelScrape: "true" and
// not so labelled.
func (c *PodCache) unlabelled(ctx context.Context) ([]types.NamespacedName, error) {
	namespaces := c.annotatedIn
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var out []types.NamespacedName
	for _, ns := range namespaces {
		list := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.client.CoreV1().Pods(ns).List(ctx, opts)
		})
		err := list.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Annotations[LabelScrape] == "true" && pod.Labels[LabelScrape] != "true" {
				out = append(out, podName(pod))
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("metrics: list the Pods of namespace %q: %w", ns, err)
		}
	}
	return out, nil
}

// wanted returns the fixed selections and each self-hosted ProviderQuota's.
// A ProviderQuota whose selector cannot be used has none; Targets says why.
func (c *PodCache) wanted(quotas []v1alpha1.ProviderQuota) []selection {
	out := slices.Clone(c.fixed)
	for i := range quotas {
		if selector, _ := quotaSelector(&quotas[i]); selector != nil {
			out = append(out, selection{namespace: quotas[i].Namespace, selector: selector.String()})
		}
	}
	return out
}

// follow starts an informer, running until ctx is done, for each wanted
// selection that has none, and stops the informers of the others. It
// returns every informer's HasSynced.
func (c *PodCache) follow(ctx context.Context, wanted []selection) []toolscache.InformerSynced {
	log := klog.FromContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := map[selection]bool{}
	for _, s := range wanted {
		keep[s] = true
		if c.informers[s] == nil {
			log.V(1).Info("Watching Pods", "namespace", s.namespace, "selector", s.selector)
			c.informers[s] = c.start(ctx, s)
		}
	}
	synced := make([]toolscache.InformerSynced, 0, len(c.informers))
	for s, inf := range c.informers {
		if !keep[s] {
			log.V(1).Info("No longer watching Pods", "namespace", s.namespace, "selector", s.selector)
			inf.stop()
			delete(c.informers, s)
			continue
		}
		synced = append(synced, inf.HasSynced)
	}
	return synced
}

// start runs an informer of a selection's Pods, trimmed by TrimPod.
func (c *PodCache) start(ctx context.Context, s selection) *podInformer {
	selectPods := func(o *metav1.ListOptions) { o.LabelSelector = s.selector }
	inf := coreinformers.NewFilteredPodInformer(c.client, s.namespace, 0, toolscache.Indexers{}, selectPods)
	_ = inf.SetTransform(TrimPod) // fails only once the informer runs
	ctx, stop := context.WithCancel(ctx)
	go inf.RunWithContext(ctx)
	return &podInformer{SharedIndexInformer: inf, stop: stop}
}

// Get reads one Pod of the cache into obj, which must be a *corev1.Pod.
func (c *PodCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("metrics: the Pod cache holds Pods, not %T", obj)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, inf := range c.informers {
		obj, found, _ := inf.GetStore().GetByKey(key.String()) // a store's error is never set
		if cached, ok := obj.(*corev1.Pod); found && ok && inf.HasSynced() {
			cached.DeepCopyInto(pod)
			return nil
		}
	}
	return apierrors.NewNotFound(podsResource, key.Name)
}

// List reads into list, which must be a *corev1.PodList, the cached Pods
// that match the namespace and label selector of opts, by namespace and
// name. A field selector is refused: the cache holds too little of a Pod.
func (c *PodCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return fmt.Errorf("metrics: the Pod cache lists Pods, not %T", list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil {
		return fmt.Errorf("metrics: the Pod cache lists Pods by label, not by field %s", o.FieldSelector)
	}
	selector := o.LabelSelector
	if selector == nil {
		selector = labels.Everything()
	}
	pods.Items = nil
	for _, p := range c.cached() {
		if (o.Namespace == "" || p.Namespace == o.Namespace) && selector.Matches(labels.Set(p.Labels)) {
			pods.Items = append(pods.Items, *p.DeepCopy())
		}
	}
	return nil
}

// cached returns each Pod of the filled informers once, by namespace and
// name. An informer that has not filled yet gives none rather than some.
func (c *PodCache) cached() []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	byKey := map[string]*corev1.Pod{}
	for _, inf := range c.informers {
		if !inf.HasSynced() {
			continue
		}
		for _, obj := range inf.GetStore().List() {
			if pod, ok := obj.(*corev1.Pod); ok {
				byKey[pod.Namespace+"/"+pod.Name] = pod
			}
		}
	}
	out := make([]*corev1.Pod, 0, len(byKey))
	for _, pod := range byKey {
		out = append(out, pod)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
