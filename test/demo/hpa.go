package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/test/cluster"
)

const (
	// loadWorkers is how many calls the load keeps in flight through the gateways: six times what
	// one Pod runs at once, so that calls wait in the gateways' queue.
	loadWorkers = 48
	// maxReplicas is the sample HPA's maxReplicas: the GPU quota over the GPUs per Pod.
	maxReplicas = 4
	// watchAfter is how long the HPA is watched once the Deployment has grown.
	watchAfter = 3 * time.Second
	// sampleKey is the sample tenant acme's key, whose enterprise plan may call the self-hosted model.
	sampleKey = "sk-acme-alice-0123456789abcdef0123456789"
)

// scaleSelfHosted sends calls for the self-hosted model through the gateways until its HPA has
// grown the Deployment, shows the HPA as `kubectl get hpa -w` does, with the time of each line,
// then stops the load.
func (st *story) scaleSelfHosted(ctx context.Context) {
	st.section("Load on the self-hosted model through the gateways: the HPA scales it on their queue")
	fmt.Printf("%d calls at a time go through the two gateways to the %s Pods (8 sequences per GPU, 1 GPU each).\n"+
		"The gateways send each ready Pod at most 8 and queue the rest, so the Pods' own queues stay empty;\n"+
		"the HPA of config/samples/selfhosted.yaml reads the gateways' queue (sluice_queue_depth), a Pod\n"+
		"for every 8 queued, up to 4 Pods (the GPU quota).\n\n", loadWorkers, selfHostedQuota)
	stopWatch := st.watchHPA()
	defer stopWatch()
	st.waitHPAMetric()
	ctx, cancel := context.WithTimeout(ctx, st.s.load)
	defer cancel()
	load := st.startLoad(ctx)
	seen := st.waitScaleUp(ctx, maxReplicas)
	time.Sleep(watchAfter) // for the watch to show the new replicas
	cancel()
	load.wait()
	if seen.grownTo <= 1 {
		st.r.Fatalf("the HPA did not scale %s up within %s", selfHostedQuota, st.s.load)
	}
	fmt.Printf("\ndemo: the HPA scaled %s from 1 to %d replicas on the gateways' queue; it wanted more %.1fs after the queue rose, and %d Pods were Ready %.1fs after\n",
		selfHostedQuota, seen.grownTo, seen.desiredAt.Sub(seen.queueRose).Seconds(), seen.grownTo, seen.readyAt.Sub(seen.queueRose).Seconds())
	fmt.Printf("demo: the gateways queued up to %d calls for %s while its Pods reported at most %d waiting; %d calls answered, %d failed\n",
		seen.maxQueued, selfHostedQuota, seen.maxWaiting, load.answered.Load(), load.failed.Load())
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

// waitHPAMetric waits until the HPA reads its metrics through the adapter.
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

// scaleUp is what the demo saw while the self-hosted model scaled up.
type scaleUp struct {
	queueRose, desiredAt, readyAt time.Time
	grownTo                       int32
	maxQueued, maxWaiting         int64
}

// waitScaleUp waits until the Deployment has want ready replicas, or ctx ends, watching the
// gateways' queue, the HPA, and the Pods' waiting requests.
func (st *story) waitScaleUp(ctx context.Context, want int32) scaleUp {
	hpas := st.c.Clientset.AutoscalingV2().HorizontalPodAutoscalers(namespace)
	deployments := st.c.Clientset.AppsV1().Deployments(namespace)
	var seen scaleUp
	for ctx.Err() == nil && seen.grownTo < want {
		queued := st.queued(selfHostedQuota)
		seen.maxQueued = max(seen.maxQueued, queued)
		seen.maxWaiting = max(seen.maxWaiting, st.mostWaiting(ctx))
		noteOnce(&seen.queueRose, queued > 0)
		if h, err := hpas.Get(ctx, selfHostedQuota, metav1.GetOptions{}); err == nil {
			noteOnce(&seen.desiredAt, h.Status.DesiredReplicas > 1)
		}
		if d, err := deployments.Get(ctx, selfHostedQuota, metav1.GetOptions{}); err == nil {
			seen.grownTo = d.Status.ReadyReplicas
		}
		time.Sleep(250 * time.Millisecond)
	}
	noteOnce(&seen.readyAt, true)
	return seen
}

// noteOnce sets *at to now the first time cond holds.
func noteOnce(at *time.Time, cond bool) {
	if cond && at.IsZero() {
		*at = time.Now()
	}
}

// queued returns the calls the gateways hold in their queues for a provider now.
func (st *story) queued(provider string) int64 {
	var total int64
	for _, g := range st.gateways {
		var q gatewayv1.Queues
		if err := getJSON(g.admin+"/admin/queues", &q); err != nil {
			continue
		}
		for _, p := range q.Providers {
			if p.Name == provider {
				total += p.Queued
			}
		}
	}
	return total
}

// mostWaiting returns the most requests any self-hosted Pod reports waiting, read through the
// aggregator as the HPA reads it.
func (st *story) mostWaiting(ctx context.Context) int64 {
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + namespace + "/pods/*/inference_requests_waiting"
	body, err := st.c.Clientset.Discovery().RESTClient().Get().AbsPath(path).Param("labelSelector", labels.FormatLabels(inferenceLabels)).DoRaw(ctx)
	var list cmv1beta2.MetricValueList
	if err != nil || json.Unmarshal(body, &list) != nil {
		return 0
	}
	var most int64
	for _, v := range list.Items {
		most = max(most, v.Value.Value())
	}
	return most
}

// load keeps loadWorkers calls for the self-hosted model in flight through the gateways, as
// the sample tenant, until its context ends.
type load struct {
	wg               sync.WaitGroup
	answered, failed atomic.Int64
}

func (st *story) startLoad(ctx context.Context) *load {
	l := &load{}
	client := &http.Client{Timeout: 2 * time.Minute}
	body := []byte(`{"model":"` + model + `","max_tokens":20,"messages":[{"role":"user","content":"A page of a book."}]}`)
	for i := range loadWorkers {
		url := st.gateways[i%len(st.gateways)].url + "/v1/chat/completions"
		l.wg.Go(func() {
			for ctx.Err() == nil {
				l.call(ctx, client, url, body)
			}
		})
	}
	return l
}

func (l *load) call(ctx context.Context, client *http.Client, url string, body []byte) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+sampleKey)
	resp, err := client.Do(req)
	switch {
	case ctx.Err() != nil:
	case err != nil || resp.StatusCode != http.StatusOK:
		l.failed.Add(1)
		time.Sleep(100 * time.Millisecond)
	default:
		l.answered.Add(1)
	}
	if err == nil {
		resp.Body.Close()
	}
}

func (l *load) wait() { l.wg.Wait() }
