package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluicehq/sluice/controllers"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/proc"
	"github.com/sluicehq/sluice/test/redisserver"
)

const (
	// namespace holds the samples, the gateways' configuration Secret and the inference Pods.
	namespace = "sluice-demo"
	// hostedQuota and selfHostedQuota are the samples' ProviderQuotas.
	hostedQuota, selfHostedQuota = "openai", "llama"
	// model is the self-hosted quota's model, which the inference Pods serve.
	model = "meta-llama/Llama-3.1-8B-Instruct"
	// inferencePort is where each inference Pod listens, on its own address.
	inferencePort = 8000
	// configSecret is the Secret the manager writes and the gateways read.
	configSecret = "sluice-gateway-config"
	// readyTimeout bounds each wait for a part to come up.
	readyTimeout = 2 * time.Minute
)

// inferenceLabels select the self-hosted quota's Pods, as config/samples/selfhosted.yaml says.
var inferenceLabels = map[string]string{"app": selfHostedQuota}

// story is one run of the demo.
type story struct {
	r        *run
	s        settings
	bin, out string

	c            *cluster.Cluster
	redis        *redisserver.Server
	providerAddr string    // where the ramp's provider listens, as the hosted quota says
	claudeAddr   string    // where the Anthropic account listens, as the quota anthropic says
	gateways     []gateway // two replicas sharing Redis
	step         int
}

// gateway is one gateway process's addresses.
type gateway struct{ url, admin string }

func (st *story) tell(ctx context.Context) {
	st.startParts()
	st.applySamples()
	st.startSluice()
	st.waitLoaded()
	st.section("The quotas, as kubectl shows them")
	st.kubectl("get", "pq,tp", "-n", namespace)
	st.kubectl("get", "pq", "-o", "wide", "-n", namespace) // llama is Ready, and Active once its first Pod is
	st.kubectl("describe", "pq", hostedQuota, "-n", namespace)
	st.rampThroughGateways()
	st.learnHostedLimits()
	st.learnAnthropicLimits()
	st.scaleSelfHosted(ctx)
	st.section("The quotas again, with live usage")
	st.kubectl("get", "pq,tp", "-n", namespace)
	st.kubectl("describe", "pq", hostedQuota, "-n", namespace)
	st.kubectl("describe", "pq", claudeQuota, "-n", namespace)
	st.kubectl("describe", "pq", selfHostedQuota, "-n", namespace)
	st.section("Done: stopping everything the demo started")
}

// section prints a numbered heading.
func (st *story) section(title string) {
	st.step++
	fmt.Printf("\n=== %d. %s\n\n", st.step, title)
}

// kubectl runs kubectl, shows the command and prints its output.
func (st *story) kubectl(args ...string) {
	fmt.Printf("$ kubectl %s\n%s\n", strings.Join(args, " "), st.c.Kubectl(st.r, args...))
}

// startParts starts the control plane, Redis and the fake kubelet of the inference Pods.
func (st *story) startParts() {
	st.section("A local control plane, Redis and the simulators, on loopback")
	begin := time.Now()
	st.c = cluster.Start(st.r, cluster.Options{ControllerManager: true, Aggregator: true})
	st.r.Logf("etcd, kube-apiserver and kube-controller-manager are up (%.1fs)", time.Since(begin).Seconds())
	st.redis = redisserver.Start(st.r, redisserver.AppendOnly()) // as the gateway's README asks Redis to run
	st.r.Logf("redis-server is up at %s", st.redis.Addr)
	st.c.RunPods(st.r, namespace, labels.SelectorFromSet(inferenceLabels), st.inferencePod)
	st.providerAddr, st.claudeAddr = freeAddr(st.r), freeAddr(st.r)
	st.r.Logf("the inference Pods will be `lab inference` processes, one per Pod; the hosted provider is `lab ramp`'s simulator at %s", st.providerAddr)
}

// applySamples applies the CRDs, the samples and the ramp's plan, and points the hosted quotas at
// the simulated providers.
func (st *story) applySamples() {
	st.section("The CRDs and the samples, applied with kubectl")
	st.kubectl("apply", "--server-side", "-f", filepath.Join("config", "crd", "bases"))
	st.kubectl("create", "namespace", namespace)
	st.kubectl("apply", "-n", namespace, "-k", filepath.Join("config", "samples"))
	patch := fmt.Sprintf(`{"spec":{"baseURL":"http://%s/v1"}}`, st.providerAddr)
	st.kubectl("patch", "pq", hostedQuota, "-n", namespace, "--type=merge", "-p", patch)
	patch = fmt.Sprintf(`{"spec":{"baseURL":"http://%s/v1"}}`, st.claudeAddr)
	st.kubectl("patch", "pq", claudeQuota, "-n", namespace, "--type=merge", "-p", patch)
	path := filepath.Join(st.r.TempDir(), "ramp.yaml")
	if err := os.WriteFile(path, []byte(rampPlan(st.rampUsers())), 0o600); err != nil {
		st.r.Fatal(err)
	}
	fmt.Printf("The lab's ramp sends as the tenant %q: a plan like the ramp's own gateway case (each user\n"+
		"2 requests a second, bursts of 5, queued; the door at 60s) and a key Secret for each of its users.\n", rampTenant)
	st.c.Kubectl(st.r, "apply", "-n", namespace, "-f", path)
}

// rampUsers is the ramp's last and largest user count.
func (st *story) rampUsers() int {
	counts := strings.Split(st.s.users, ",")
	n, err := strconv.Atoi(counts[len(counts)-1])
	if err != nil {
		st.r.Fatal(err)
	}
	return n
}

// startSluice starts the manager, two gateways on the configuration it writes, and the metrics
// adapter, and creates the self-hosted model's Deployment.
func (st *story) startSluice() {
	st.section("The manager, two gateways sharing Redis, and the metrics adapter")
	st.gateways = []gateway{newGateway(st.r), newGateway(st.r)}
	var usage []string
	for _, g := range st.gateways {
		usage = append(usage, g.admin+"/admin/usage")
	}
	base := filepath.Join(st.r.TempDir(), "base-config.yaml")
	if err := os.WriteFile(base, []byte(baseConfig(st.redis.Addr, len(st.gateways))), 0o600); err != nil {
		st.r.Fatal(err)
	}
	st.startProcess("manager", "manager", "--namespace="+namespace, "--config-secret="+configSecret, "--base-config="+base,
		"--gateway-usage-urls="+strings.Join(usage, ","), "--usage-interval=2s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	configDir := st.r.TempDir()
	volume := cluster.Projection{Secrets: controllers.ConfigSecretNames(configSecret), OptionalConfigMaps: controllers.RecordConfigMapNames(configSecret)}
	st.c.MountProjected(st.r, namespace, volume, configDir, "config.yaml")
	for i, g := range st.gateways {
		st.startProcess(fmt.Sprintf("gateway-%d", i), "gateway", "--config="+filepath.Join(configDir, "config.yaml"),
			"--listen="+strings.TrimPrefix(g.url, "http://"), "--admin-listen="+strings.TrimPrefix(g.admin, "http://"),
			fmt.Sprintf("--name=gateway-%d", i))
	}
	for _, g := range st.gateways {
		st.waitReady(g.admin + "/readyz")
	}
	st.r.Logf("the manager compiled the quotas and plans into the Secret %s; two gateways serve it at %s and %s", configSecret, st.gateways[0].url, st.gateways[1].url)
	adapterPort := freePort(st.r)
	st.startProcess("metrics-adapter", "metrics-adapter", "--secure-port="+strconv.Itoa(adapterPort), "--bind-address=127.0.0.1",
		"--cert-dir="+st.r.TempDir(), "--lister-kubeconfig="+st.c.Kubeconfig,
		"--authentication-kubeconfig="+st.c.Kubeconfig, "--authorization-kubeconfig="+st.c.Kubeconfig,
		"--discovery-interval=5s", "--gateway-usage="+namespace+"="+usage[0], "--gateway-usage="+namespace+"="+usage[1])
	st.c.RegisterMetricsAdapter(st.r, adapterPort)
	if _, err := st.c.Clientset.AppsV1().Deployments(namespace).Create(context.Background(), cluster.Deployment(selfHostedQuota, inferenceLabels, inferencePort), metav1.CreateOptions{}); err != nil {
		st.r.Fatal(err)
	}
	st.r.Logf("the metrics adapter serves custom.metrics.k8s.io and external.metrics.k8s.io through the aggregator; the Deployment %s runs one inference Pod", selfHostedQuota)
}

// startProcess runs one of the binaries, under a name of its own, with the admin's kubeconfig.
func (st *story) startProcess(name, binary string, args ...string) *proc.Process {
	cmd := exec.Command(filepath.Join(st.bin, binary), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+st.c.Kubeconfig)
	return proc.Start(st.r, name, cmd)
}

// waitLoaded waits until the self-hosted quota's first Pod is ready and every gateway has loaded
// the configuration that serves it: the quotas are Compiled, not GatewaysBehind.
func (st *story) waitLoaded() {
	deadline := time.Now().Add(readyTimeout)
	for {
		active := st.c.Kubectl(st.r, "get", "pq", selfHostedQuota, "-n", namespace, "-o", `jsonpath={.status.conditions[?(@.type=="Active")].status}`)
		reasons := st.c.Kubectl(st.r, "get", "pq", "-n", namespace, "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].reason} {end}`)
		if active == "True" && strings.Count(reasons, "Compiled") == len(strings.Fields(reasons)) {
			return
		}
		if time.Now().After(deadline) {
			st.r.Fatalf("the quotas are not loaded by every gateway after %s: Active %q, Ready reasons %q", readyTimeout, active, reasons)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitReady waits until url answers 200.
func (st *story) waitReady(url string) {
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			st.r.Fatalf("%s is not ready after %s (last: %v)", url, readyTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inferencePod is the command that plays an inference Pod: a vLLM-style simulator with the
// sample's one GPU and eight sequences per GPU.
func (st *story) inferencePod(pod *corev1.Pod, ip string) *exec.Cmd {
	return exec.Command(filepath.Join(st.bin, "lab"), "inference",
		"-listen", net.JoinHostPort(ip, strconv.Itoa(inferencePort)),
		"-engine", "vllm", "-model", model, "-gpus", "1", "-max-num-seqs", "8",
		"-token-latency", "50ms", "-default-max-tokens", "20")
}

func newGateway(r *run) gateway {
	return gateway{url: "http://" + freeAddr(r), admin: "http://" + freeAddr(r)}
}

// freeAddr returns a loopback address with a port free now.
func freeAddr(r *run) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func freePort(r *run) int {
	_, port, _ := net.SplitHostPort(freeAddr(r))
	n, _ := strconv.Atoi(port)
	return n
}

// streamLines copies r to w line by line, each line prefixed with the time.
func streamLines(w io.Writer, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fmt.Fprintf(w, "%s  %s\n", time.Now().Format("15:04:05"), sc.Text())
	}
}

// readJSON decodes the JSON file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
