package metrics

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluicehq/sluice/controllers/usage"
)

// gateways polls the queues of the gateways of each namespace: those at
// fixed URLs, and the Pods that a selector finds in any namespace, at
// /admin/queues. It is safe for concurrent use.
type gateways struct {
	reader    client.Reader
	static    map[string][]string // queue (or usage) URLs by namespace
	selector  labels.Selector     // nil means no Pods
	port      int32
	tokenFile string // the gateways' admin token; empty sends none
	tokenFor  string // the namespace whose gateways the token is sent to
	client    *http.Client

	mu          sync.Mutex
	byNamespace map[string]*usage.Poller
}

// pollers returns a poller for each namespace that has, or had, gateways.
// A namespace whose gateway Pods are gone keeps its poller, which then finds
// no gateway and so serves no value.
func (g *gateways) pollers(ctx context.Context) ([]*usage.Poller, error) {
	namespaces, err := g.namespaces(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	for ns := range namespaces {
		if g.byNamespace[ns] == nil {
			g.byNamespace[ns] = g.newPoller(ns)
		}
	}
	out := make([]*usage.Poller, 0, len(g.byNamespace))
	for _, p := range g.byNamespace {
		out = append(out, p)
	}
	return out, err
}

// namespaces returns the namespaces with gateways at fixed URLs or with
// selected Pods. If the Pods cannot be listed, it returns the first ones and
// the error.
func (g *gateways) namespaces(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	for ns := range g.static {
		out[ns] = true
	}
	if g.selector == nil {
		return out, nil
	}
	var pods corev1.PodList
	if err := g.reader.List(ctx, &pods, client.MatchingLabelsSelector{Selector: g.selector}); err != nil {
		return out, fmt.Errorf("list the gateway Pods: %w", err)
	}
	for _, pod := range pods.Items {
		out[pod.Namespace] = true
	}
	return out, nil
}

func (g *gateways) newPoller(namespace string) *usage.Poller {
	listers := usage.AllGateways{usage.StaticGateways(g.static[namespace])}
	if g.selector != nil {
		listers = append(listers, &usage.PodGateways{Reader: g.reader, Namespace: namespace, Selector: g.selector, Port: g.port, Path: usage.QueuesPath})
	}
	p := &usage.Poller{Namespace: namespace, Gateways: listers, Client: g.client}
	if namespace == g.tokenFor {
		p.AdminTokenFile = g.tokenFile
	}
	return p
}

// totals returns the sum of the last poll of a namespace's gateways, or nil
// if it has none.
func (g *gateways) totals(namespace string) *usage.Totals {
	g.mu.Lock()
	p := g.byNamespace[namespace]
	g.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Usage(namespace)
}
