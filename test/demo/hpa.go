package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluicehq/sluice/test/cluster"
)

const (
	// loadWorkers is how many requests the load keeps in flight at the inference Pods: six times
	// what one Pod runs at once, so that requests wait in it.
	loadWorkers = 48
	// maxReplicas is the sample HPA's maxReplicas: the GPU quota over the GPUs per Pod.
	maxReplicas = 4
	// watchAfter is how long the HPA is watched once the Deployment has grown.
	watchAfter = 3 * time.Second
)

// scaleSelfHosted loads the self-hosted model until its HPA has grown the Deployment, shows the
// HPA as `kubectl get hpa -w` does, with the time of each line, then stops the load.
func (st *story) scaleSelfHosted(ctx context.Context) {
	st.section("Load on the self-hosted model: the HPA scales it on waiting requests")
	fmt.Printf("%d requests at a time go to the %s Pods (8 sequences per GPU, 1 GPU each); the HPA of\n"+
		"config/samples/selfhosted.yaml wants at most 4 waiting per Pod, up to 4 Pods (the GPU quota).\n\n", loadWorkers, selfHostedQuota)
	stopWatch := st.watchHPA()
	defer stopWatch()
	st.waitHPAMetric()
	ctx, cancel := context.WithTimeout(ctx, st.s.load)
	defer cancel()
	load := st.startLoad(ctx)
	began := time.Now()
	desiredAt, grownTo := st.waitScaleUp(ctx, maxReplicas)
	time.Sleep(watchAfter) // for the watch to show the new replicas
	cancel()
	load.wait()
	if grownTo <= 1 {
		st.r.Fatalf("the HPA did not scale %s up within %s", selfHostedQuota, st.s.load)
	}
	fmt.Printf("\ndemo: the HPA scaled %s from 1 to %d replicas; it wanted more %.1fs after the load began\n",
		selfHostedQuota, grownTo, desiredAt.Sub(began).Seconds())
	if st.s.settle > 0 {
		fmt.Printf("demo: the load has stopped; watching the HPA scale back for %s\n", st.s.settle)
		time.Sleep(st.s.settle)
	}
}

// watchHPA runs `kubectl get hpa -w` and prints its lines with their time, until the returned
// function is called.
func (st *story) watchHPA() func() {
	assets, err := cluster.AssetsDir()
	if err != nil {
		st.r.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", st.c.Kubeconfig, "get", "hpa", selfHostedQuota, "-n", namespace, "-w")
	out, err := cmd.StdoutPipe()
	if err != nil {
		st.r.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		st.r.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		streamLines(os.Stdout, out)
	}()
	return func() {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
	}
}

// waitHPAMetric waits until the HPA reads the idle Pod's waiting requests through the adapter.
func (st *story) waitHPAMetric() {
	hpas := st.c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(namespace)
	deadline := time.Now().Add(readyTimeout)
	for {
		h, err := hpas.Get(context.Background(), selfHostedQuota, metav1.GetOptions{})
		if err == nil && len(h.Status.CurrentMetrics) > 0 {
			return
		}
		if time.Now().After(deadline) {
			st.r.Fatalf("the HPA read no metric in %s", readyTimeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitScaleUp waits until the Deployment has want ready replicas, or ctx ends, and returns when
// the HPA first wanted more than one and how many are ready at the end.
func (st *story) waitScaleUp(ctx context.Context, want int32) (time.Time, int32) {
	hpas := st.c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(namespace)
	deployments := st.c.Clientset.AppsV1().Deployments(namespace)
	var desiredAt time.Time
	var ready int32
	for ctx.Err() == nil && ready < want {
		if h, err := hpas.Get(ctx, selfHostedQuota, metav1.GetOptions{}); err == nil && h.Status.DesiredReplicas > 1 && desiredAt.IsZero() {
			desiredAt = time.Now()
		}
		if d, err := deployments.Get(ctx, selfHostedQuota, metav1.GetOptions{}); err == nil {
			ready = d.Status.ReadyReplicas
		}
		time.Sleep(500 * time.Millisecond)
	}
	return desiredAt, ready
}

// load keeps loadWorkers requests in flight at the ready inference Pods, spread over them as a
// Service would, until its context ends.
type load struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	ips []string
}

func (st *story) startLoad(ctx context.Context) *load {
	l := &load{}
	l.wg.Go(func() { l.followPods(ctx, st) })
	client := &http.Client{Timeout: 30 * time.Second}
	body := []byte(`{"model":"` + model + `","max_tokens":20,"messages":[{"role":"user","content":"A page of a book."}]}`)
	for i := range loadWorkers {
		l.wg.Go(func() {
			for n := i; ctx.Err() == nil; n++ {
				ip := l.pick(n)
				if ip == "" {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				url := "http://" + net.JoinHostPort(ip, strconv.Itoa(inferencePort)) + "/v1/chat/completions"
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	return l
}

// followPods keeps the addresses of the ready inference Pods.
func (l *load) followPods(ctx context.Context, st *story) {
	pods := st.c.Clientset.CoreV1().Pods(namespace)
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.FormatLabels(inferenceLabels)})
		if err == nil {
			var ips []string
			for _, p := range list.Items {
				if p.Status.PodIP != "" && isReady(&p) && p.DeletionTimestamp == nil {
					ips = append(ips, p.Status.PodIP)
				}
			}
			l.mu.Lock()
			l.ips = ips
			l.mu.Unlock()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (l *load) pick(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ips) == 0 {
		return ""
	}
	return l.ips[n%len(l.ips)]
}

func (l *load) wait() { l.wg.Wait() }

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
