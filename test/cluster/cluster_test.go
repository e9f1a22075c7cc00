package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
)

// servePodEnv makes the test binary act as a Pod's process: it serves HTTP on the address given.
const servePodEnv = "SLUICE_TEST_SERVE_POD"

// settle bounds each wait for the control plane's controllers to act.
const settle = 90 * time.Second

func TestMain(m *testing.M) {
	if addr := os.Getenv(servePodEnv); addr != "" {
		servePod(addr)
		return
	}
	os.Exit(m.Run())
}

func servePod(addr string) {
	name := os.Getenv("POD_NAME")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) })
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func TestFakeKubeletRunsDeploymentPods(t *testing.T) {
	c := cluster.Start(t, cluster.Options{ControllerManager: true})
	ctx := context.Background()
	const ns, port = "default", 8080
	selector := map[string]string{"app": "web"}

	c.RunPods(t, ns, labels.SelectorFromSet(selector), func(pod *corev1.Pod, ip string) *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), servePodEnv+"="+net.JoinHostPort(ip, fmt.Sprint(port)), "POD_NAME="+pod.Name)
		return cmd
	})
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, deployment(selector, port), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, cpuHPA(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	poll.Until(t, settle, "2 available replicas", func() bool {
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2
	})
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	wide := c.Kubectl(t, "get", "pods", "-n", ns, "-o", "wide")
	seen := map[string]bool{}
	for _, pod := range pods.Items {
		ip := pod.Status.PodIP
		if parsed := net.ParseIP(ip); parsed == nil || !parsed.IsLoopback() || ip == "127.0.0.1" || seen[ip] {
			t.Errorf("pod %s has podIP %q; want its own loopback address", pod.Name, ip)
		}
		seen[ip] = true
		if got := get(t, fmt.Sprintf("http://%s:%d/", ip, port)); got != pod.Name {
			t.Errorf("GET from %s's address answered %q; want the pod's own process", pod.Name, got)
		}
		if !strings.Contains(wide, pod.Name) || !strings.Contains(wide, ip) {
			t.Errorf("kubectl get pods -o wide does not show %s at %s:\n%s", pod.Name, ip, wide)
		}
	}
	if n := strings.Count(wide, "Running"); n != 2 {
		t.Errorf("kubectl get pods -o wide shows %d Running pods; want 2:\n%s", n, wide)
	}

	// The HPA controller runs: with no metrics API it says so in the HPA's conditions.
	poll.Until(t, settle, "the HPA controller to report on the HPA", func() bool {
		h, err := c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(h.Status.Conditions) > 0
	})
}

// deployment is two replicas of a web server, with the CPU request a CPU HPA needs.
func deployment(selector map[string]string, port int32) *appsv1.Deployment {
	d := cluster.Deployment("web", selector, port)
	d.Spec.Replicas = ptr.To[int32](2)
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	return d
}

func cpuHPA() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    4,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
				},
			}},
		},
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return string(body)
}
