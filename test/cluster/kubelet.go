package cluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/sluicehq/sluice/test/proc"
)

const (
	// kubeletSyncPeriod is how often the fake kubelet looks for new and deleted Pods.
	kubeletSyncPeriod = 200 * time.Millisecond
	// readinessTimeout bounds the wait for a Pod's process to accept connections on its port.
	readinessTimeout = 30 * time.Second
)

// PodProcess returns the command that plays the Pod's containers, to be run with the Pod's
// address ip: the process must listen on ip, not on 0.0.0.0.
type PodProcess func(pod *corev1.Pod, ip string) *exec.Cmd

// Kubelet plays the kubelet for the Pods of one selector: for each new Pod it starts a process on
// its own loopback address, waits until the process accepts connections on the first declared
// container port (if any), and reports the Pod Running and Ready with that podIP. When a Pod goes
// away its process is stopped. It stops with the test.
type Kubelet struct {
	cluster   *Cluster
	namespace string
	selector  labels.Selector
	start     PodProcess

	mu   sync.Mutex
	pods map[types.UID]*proc.Process
}

// RunPods starts a fake kubelet for the Pods in namespace that match selector.
func (c *Cluster) RunPods(t testing.TB, namespace string, selector labels.Selector, start PodProcess) *Kubelet {
	k := &Kubelet{cluster: c, namespace: namespace, selector: selector, start: start, pods: map[types.UID]*proc.Process{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(ctx, t)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return k
}

func (k *Kubelet) run(ctx context.Context, t testing.TB) {
	ticker := time.NewTicker(kubeletSyncPeriod)
	defer ticker.Stop()
	for {
		if err := k.sync(ctx, t); err != nil && ctx.Err() == nil {
			t.Logf("cluster: fake kubelet: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// sync starts a process for each new Pod and stops the processes of Pods that are gone.
func (k *Kubelet) sync(ctx context.Context, t testing.TB) error {
	list, err := k.cluster.Clientset.CoreV1().Pods(k.namespace).List(ctx, metav1.ListOptions{LabelSelector: k.selector.String()})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	live := map[types.UID]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		live[pod.UID] = true
		if !k.has(pod.UID) {
			k.launch(ctx, t, pod)
		}
	}
	k.stopAllBut(live)
	return nil
}

func (k *Kubelet) has(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.pods[uid]
	return ok
}

func (k *Kubelet) launch(ctx context.Context, t testing.TB, pod *corev1.Pod) {
	port, _ := firstPort(pod)
	ip := k.cluster.ips.allocate(port)
	p := proc.Start(t, pod.Name, k.start(pod, ip))
	k.mu.Lock()
	k.pods[pod.UID] = p
	k.mu.Unlock()
	go func() {
		if err := k.markReady(ctx, pod, ip, p); err != nil && ctx.Err() == nil {
			t.Logf("cluster: fake kubelet: pod %s: %v", pod.Name, err)
		}
	}()
}

func (k *Kubelet) stopAllBut(live map[types.UID]bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, p := range k.pods {
		if !live[uid] {
			p.Stop()
			delete(k.pods, uid)
		}
	}
}

// markReady waits for the process to listen, then reports the Pod Running and Ready at ip.
func (k *Kubelet) markReady(ctx context.Context, pod *corev1.Pod, ip string, p *proc.Process) error {
	if port, ok := firstPort(pod); ok {
		if err := waitListening(ctx, net.JoinHostPort(ip, strconv.Itoa(int(port))), p); err != nil {
			return err
		}
	}
	pods := k.cluster.Clientset.CoreV1().Pods(pod.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		setRunning(current, ip)
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
}

func firstPort(pod *corev1.Pod) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			return c.Ports[0].ContainerPort, true
		}
	}
	return 0, false
}

func waitListening(ctx context.Context, addr string, p *proc.Process) error {
	deadline := time.Now().Add(readinessTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s: %w", addr, readinessTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Exited():
			return fmt.Errorf("process exited before listening on %s:\n%s", addr, p.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// setRunning writes the status a kubelet reports for a started, ready Pod.
func setRunning(pod *corev1.Pod, ip string) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.StartTime = &now
	pod.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		started := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// AddRunningPod creates pod and reports it Running and Ready at ip, as the kubelet would, for a
// server that the test runs itself on that address.
func (c *Cluster) AddRunningPod(t testing.TB, pod *corev1.Pod, ip string) {
	t.Helper()
	pods := c.Clientset.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cluster: create Pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	setRunning(created, ip)
	if _, err := pods.UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cluster: report Pod %s/%s running: %v", pod.Namespace, pod.Name, err)
	}
}

// Deployment is a Deployment of one replica whose one container listens on port, selected by
// labels: what a fake kubelet plays as a process per Pod.
func Deployment(name string, labels map[string]string, port int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  name,
					Image: "example.invalid/" + name + ":1",
					Ports: []corev1.ContainerPort{{ContainerPort: port}},
				}}},
			},
		},
	}
}
