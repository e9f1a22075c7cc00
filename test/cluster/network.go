package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// endpointSyncPeriod is how often the service network writes the Services' EndpointSlices.
	endpointSyncPeriod = 500 * time.Millisecond
	// endpointSliceManager marks the EndpointSlices the service network writes.
	endpointSliceManager = "sluice-test-service-network"
)

// serviceNetwork plays kube-proxy and the EndpointSlice controller for Pods on loopback
// addresses, which an EndpointSlice of IP addresses refuses:
//
//   - kube-apiserver sends what it dials in the cluster (the aggregator's calls to an APIService's
//     Service) through its egress selector, an HTTP CONNECT proxy on a Unix socket; the proxy
//     sends a Service's ClusterIP and port to the port of one of its ready Pods, round robin, and
//     a loopback address as it is. It refuses any other address.
//   - each Service with a selector gets an EndpointSlice of its Pods, of addressType FQDN
//     (<a-b-c-d>.<namespace>.pod), ready as the Pods are, with the Service's target ports, so
//     that the aggregator sees the endpoints it asks for before it calls an APIService.
type serviceNetwork struct {
	cluster *Cluster
	socket  string
	next    atomic.Uint64
}

// configureServiceNetwork points kube-apiserver's egress for the cluster at a proxy on a Unix
// socket of dir, which serves once the cluster has a client.
func configureServiceNetwork(env *envtest.Environment, c *Cluster, dir string) (*serviceNetwork, error) {
	n := &serviceNetwork{cluster: c, socket: filepath.Join(dir, "egress.sock")}
	config := filepath.Join(dir, "egress.yaml")
	err := os.WriteFile(config, []byte(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: `+n.socket+"\n"), 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: service network: %w", err)
	}
	env.ControlPlane.GetAPIServer().Configure().Set("egress-selector-config-file", config)
	return n, nil
}

// start serves the egress proxy and writes EndpointSlices until the test ends.
func (n *serviceNetwork) start(t testing.TB) {
	ln, err := net.Listen("unix", n.socket)
	if err != nil {
		t.Fatalf("cluster: service network: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { n.serve(ctx, ln) })
	wg.Go(func() { n.writeEndpointSlices(ctx, t) })
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
}

func (n *serviceNetwork) serve(ctx context.Context, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go n.tunnel(ctx, conn)
	}
}

// tunnel answers one CONNECT request and copies bytes both ways until either side closes.
func (n *serviceNetwork) tunnel(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil || req.Method != http.MethodConnect {
		fmt.Fprint(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	upstream, err := n.DialContext(ctx, "tcp", req.Host)
	if err != nil {
		fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n%s", len(err.Error()), err)
		return
	}
	defer upstream.Close()
	fmt.Fprint(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}

// DialContext dials addr as a Pod would: a Service's ClusterIP and port reach one of its ready
// Pods, a loopback address is dialled as it is, and any other address is refused.
func (n *serviceNetwork) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	target, err := n.resolve(ctx, host, port)
	if err != nil {
		return nil, fmt.Errorf("cluster: service network: %s: %w", addr, err)
	}
	return (&net.Dialer{}).DialContext(ctx, network, target)
}

// resolve returns the address of a ready Pod of the Service at clusterIP:port.
func (n *serviceNetwork) resolve(ctx context.Context, clusterIP, port string) (string, error) {
	services, err := n.cluster.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, svc := range services.Items {
		if svc.Spec.ClusterIP != clusterIP {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if strconv.Itoa(int(sp.Port)) != port {
				continue
			}
			var ready []string
			for _, e := range n.endpoints(ctx, &svc) {
				if target, ok := e.ports[sp.Name]; ok && e.ready {
					ready = append(ready, net.JoinHostPort(e.ip, strconv.Itoa(int(target))))
				}
			}
			if len(ready) == 0 {
				return "", fmt.Errorf("service %s/%s has no ready endpoint for port %s", svc.Namespace, svc.Name, port)
			}
			return ready[n.next.Add(1)%uint64(len(ready))], nil
		}
		return "", fmt.Errorf("service %s/%s has no port %s", svc.Namespace, svc.Name, port)
	}
	return "", fmt.Errorf("no Service has this ClusterIP; only Services and loopback addresses are reachable")
}

// endpoint is one Pod of a Service: its address, its readiness and the Service's ports on it.
type endpoint struct {
	pod   *corev1.Pod
	ip    string
	ready bool
	ports map[string]int32 // the Pod's port for each of the Service's port names
}

// endpoints are the Pods of a Service that have an address and are not going away.
func (n *serviceNetwork) endpoints(ctx context.Context, svc *corev1.Service) []endpoint {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	pods, err := n.cluster.Clientset.CoreV1().Pods(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return nil
	}
	var out []endpoint
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		e := endpoint{pod: pod, ip: pod.Status.PodIP, ready: PodReady(pod), ports: map[string]int32{}}
		for _, sp := range svc.Spec.Ports {
			if target, ok := targetPort(pod, sp); ok {
				e.ports[sp.Name] = target
			}
		}
		out = append(out, e)
	}
	return out
}

// PodReady reports whether pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// targetPort is a Service port's port on a Pod: its targetPort's number, or the Pod's container
// port of that name; the Service's port when targetPort is not set.
func targetPort(pod *corev1.Pod, sp corev1.ServicePort) (int32, bool) {
	switch {
	case sp.TargetPort.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == sp.TargetPort.StrVal {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	case sp.TargetPort.IntVal != 0:
		return sp.TargetPort.IntVal, true
	}
	return sp.Port, true
}

// writeEndpointSlices keeps an EndpointSlice for each Service with a selector, until ctx ends.
func (n *serviceNetwork) writeEndpointSlices(ctx context.Context, t testing.TB) {
	for ctx.Err() == nil {
		if err := n.syncEndpointSlices(ctx); err != nil && ctx.Err() == nil {
			t.Logf("cluster: service network: %v", err)
		}
		sleepCtx(ctx, endpointSyncPeriod)
	}
}

func (n *serviceNetwork) syncEndpointSlices(ctx context.Context) error {
	if n.cluster.Clientset == nil {
		return nil
	}
	services, err := n.cluster.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range services.Items {
		svc := &services.Items[i]
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		if err := n.applyEndpointSlice(ctx, endpointSlice(svc, n.endpoints(ctx, svc))); err != nil {
			return fmt.Errorf("EndpointSlice of %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	return nil
}

// endpointSlice is the EndpointSlice of a Service's Pods, as the EndpointSlice controller would
// write it but for its addresses, which are names (see serviceNetwork).
func endpointSlice(svc *corev1.Service, endpoints []endpoint) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-loopback", Namespace: svc.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: endpointSliceManager}},
		AddressType: discoveryv1.AddressTypeFQDN,
	}
	ports := map[string]int32{}
	for _, e := range endpoints {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{strings.ReplaceAll(e.ip, ".", "-") + "." + svc.Namespace + ".pod"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.ready), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: e.pod.Namespace, Name: e.pod.Name, UID: e.pod.UID},
		})
		for name, port := range e.ports {
			ports[name] = port
		}
	}
	for _, sp := range svc.Spec.Ports {
		if port, ok := ports[sp.Name]; ok {
			slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(port), Protocol: ptr.To(sp.Protocol)})
		}
	}
	return slice
}

func (n *serviceNetwork) applyEndpointSlice(ctx context.Context, want *discoveryv1.EndpointSlice) error {
	slices := n.cluster.Clientset.DiscoveryV1().EndpointSlices(want.Namespace)
	got, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(got.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(got.Ports, want.Ports) {
		return nil
	}
	got.Endpoints, got.Ports = want.Endpoints, want.Ports
	_, err = slices.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// ServiceTransport returns an HTTP transport that reaches Services by their ClusterIP and port,
// and loopback addresses, as a Pod of the cluster would. The cluster needs Options.ServiceNetwork.
func (c *Cluster) ServiceTransport(t testing.TB) *http.Transport {
	t.Helper()
	if c.network == nil {
		t.Fatal("cluster: ServiceTransport needs Options.ServiceNetwork")
	}
	return &http.Transport{DialContext: c.network.DialContext}
}
