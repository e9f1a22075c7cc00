package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/redisserver"
)

// installedNamespace is where the runs install Sluice, as config/README.md does.
const installedNamespace = "sluice-system"

// runningImages are the programs that play the images of the chart's and config/default's
// Deployments, and the lab's inference server for the sample's self-hosted model. The adapter's
// --secure-port listens on every address unless told one, and the chart runs two adapters.
func runningImages() cluster.Images {
	return cluster.Images{
		"sluice-manager":         {Binary: managerBin},
		"sluice-gateway":         {Binary: gatewayBin},
		"sluice-metrics-adapter": {Binary: adapterBin, BindAddressFlag: "--bind-address"},
		"sluice-lab":             {Binary: labBin},
	}
}

// TestHelmInstallRuns installs the chart with its default values into a local control plane and
// runs its Deployments' Pods as the kubelet would (cluster.RunContainers): each container's own
// arguments, environment, mounted Secrets, ConfigMaps and service-account token, with the
// chart's RBAC. The only values set are the ones this machine forces: redis.address, the
// harness's Redis on a free port. The samples of config/samples are applied, the ProviderQuota
// openai pointed at the lab's provider (also on a free port), and a Deployment llama of the lab's
// inference server plays the sample's self-hosted model. Then: the manager reconciles the samples,
// both gateways serve a chat completion with a sample tenant's key (at their Pods' addresses and
// through their Service), the adapter's APIServices are Available and answer through the
// aggregator, and the sample's HPA reads a metric from them.
func TestHelmInstallRuns(t *testing.T) {
	c := cluster.Start(t, cluster.Options{ControllerManager: true, Aggregator: true, ServiceNetwork: true})
	redis := redisserver.Start(t, redisserver.AppendOnly())
	provider := startLabProvider(t)
	if out, err := helm(t, "install", "sluice", "charts/sluice", "--kubeconfig", c.Kubeconfig, "-n", installedNamespace,
		"--create-namespace", "--set", "redis.address="+redis.Addr); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	release := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": "sluice"})
	runner := c.RunContainers(t, installedNamespace, release, runningImages())
	applySamples(t, c, provider)
	checkRunningInstall(t, c, runner, "sluice-gateway", "sluice-manager", "sluice-metrics-adapter")
}

// TestKustomizeDefaultRuns is TestHelmInstallRuns for config/default, applied as config/README.md
// says, with the one change this machine forces: the Redis address of the manager's base
// configuration (config/manager/base-config.yaml), where the test's Redis listens.
func TestKustomizeDefaultRuns(t *testing.T) {
	c := cluster.Start(t, cluster.Options{ControllerManager: true, Aggregator: true, ServiceNetwork: true})
	redis := redisserver.Start(t, redisserver.AppendOnly())
	provider := startLabProvider(t)
	const sampleRedis = "address: redis.sluice-system.svc:6379"
	manifests := c.Kubectl(t, "kustomize", "../../config/default")
	if !strings.Contains(manifests, sampleRedis) {
		t.Fatalf("config/default's base configuration does not hold %q", sampleRedis)
	}
	manifests = strings.Replace(manifests, sampleRedis, "address: "+redis.Addr, 1)
	c.Kubectl(t, "apply", "--server-side", "-f", writeManifest(t, manifests))
	// config/README.md's one step by hand: the gateways' admin token, which kustomize cannot draw.
	c.Kubectl(t, "create", "secret", "generic", "sluice-gateway-admin-token", "-n", installedNamespace, "--from-literal=token="+strings.Repeat("k", 32))
	components, err := labels.Parse("app.kubernetes.io/name in (sluice-gateway, sluice-manager, sluice-metrics-adapter)")
	if err != nil {
		t.Fatal(err)
	}
	runner := c.RunContainers(t, installedNamespace, components, runningImages())
	applySamples(t, c, provider)
	checkRunningInstall(t, c, runner, "sluice-gateway", "sluice-manager", "sluice-metrics-adapter")
}

// applySamples applies config/samples to installedNamespace, points the ProviderQuota openai at
// provider, and runs a Deployment llama of the lab's inference server for the self-hosted one.
func applySamples(t *testing.T, c *cluster.Cluster, provider string) {
	t.Helper()
	c.Kubectl(t, "apply", "--server-side", "-n", installedNamespace, "-k", "../../config/samples")
	c.Kubectl(t, "patch", "-n", installedNamespace, "pq", "openai", "--type=merge", "-p", `{"spec":{"baseURL":"`+provider+`/v1"}}`)
	c.Kubectl(t, "apply", "--server-side", "-n", installedNamespace, "-f", writeManifest(t, llamaDeployment))
	c.RunContainers(t, installedNamespace, labels.SelectorFromSet(labels.Set{"app": "llama"}), runningImages())
}

// llamaDeployment runs the lab's vLLM-like inference server for the sample's self-hosted model,
// as config/default's namespace admits it: under the restricted Pod Security Standard.
const llamaDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: llama}
spec:
  replicas: 1
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: vllm
          image: sluice-lab:latest
          args: [inference, -listen, ":8000", -engine, vllm, -model, meta-llama/Llama-3.1-8B-Instruct, -gpus, "1",
                 -max-num-seqs, "8", -token-latency, 10ms, -default-max-tokens, "20"]
          ports: [{name: http, containerPort: 8000}]
          readinessProbe: {tcpSocket: {port: http}, periodSeconds: 1}
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`

// checkRunningInstall checks what an install of Sluice does once its Pods run, whichever way it
// was installed: the Deployments named become ready, the manager reconciles the samples, the
// gateways serve, the adapter answers through the aggregator and the HPA reads it.
func checkRunningInstall(t *testing.T, c *cluster.Cluster, runner *cluster.ContainerRunner, gateway, manager, adapter string) {
	t.Helper()
	ctx := t.Context()
	for _, name := range []string{manager, gateway, adapter, "llama"} {
		poll.Until(t, settle, "deployment "+name+" to be ready", func() bool {
			d := deploymentOf(t, ctx, c, installedNamespace, name)
			return d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas
		})
	}
	checkSamplesReady(t, c)
	checkUsageReported(t, c)
	checkGatewaysServe(t, ctx, c, gateway)
	checkAdapterServes(t, ctx, c)
	checkManagerMetricsVerified(t, ctx, c, manager)
	if n := runner.Restarts(); n != 0 {
		t.Errorf("the Pods' containers exited %d times; want none", n)
	}
}

// checkSamplesReady waits until every sample ProviderQuota and TenantPlan is Ready.
func checkSamplesReady(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	want := "pq/anthropic=True pq/llama=True pq/openai=True tp/claude-team=True tp/enterprise=True tp/free=True tp/pro=True"
	var got string
	poll.Until(t, settle, "the samples to be Ready", func() bool {
		var states []string
		for _, kind := range []string{"pq", "tp"} {
			out := c.Kubectl(t, "get", kind, "-n", installedNamespace, "-o",
				`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
			for _, s := range strings.Fields(out) {
				states = append(states, kind+"/"+s)
			}
		}
		got = strings.Join(states, " ")
		return got == want
	})
}

// checkUsageReported waits until the manager reports the gateways' usage on the ProviderQuota
// openai: its poller reads their admin port, which asks for the install's admin token.
func checkUsageReported(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	poll.Until(t, settle, "the gateways' usage on pq/openai", func() bool {
		return c.Kubectl(t, "get", "pq", "openai", "-n", installedNamespace, "-o",
			`jsonpath={.status.conditions[?(@.type=="UsageReported")].status}`) == "True"
	})
}

// checkGatewaysServe sends a chat completion with a sample tenant's key to each ready gateway
// Pod, and through the gateways' Service, until each is answered.
func checkGatewaysServe(t *testing.T, ctx context.Context, c *cluster.Cluster, gateway string) {
	t.Helper()
	pods, err := c.Clientset.CoreV1().Pods(installedNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + gateway})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, pod := range pods.Items {
		if cluster.PodReady(&pod) {
			targets = append(targets, net.JoinHostPort(pod.Status.PodIP, "8080"))
		}
	}
	if len(targets) != 2 {
		t.Fatalf("%d gateway Pods are ready; want the chart's 2", len(targets))
	}
	svc, err := c.Clientset.CoreV1().Services(installedNamespace).Get(ctx, gateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets = append(targets, net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))))
	through := &http.Client{Transport: c.ServiceTransport(t), Timeout: time.Minute}
	for _, target := range targets {
		var status int
		var body string
		poll.Until(t, settle, "a chat completion from "+target, func() bool {
			status, body = chat(ctx, through, target)
			return status == http.StatusOK
		})
		t.Logf("%s answered %d: %.120s", target, status, body)
	}
}

// chat sends chatBody with the sample tenant's key and returns the answer's status and body.
func chat(ctx context.Context, client *http.Client, target string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+target+"/v1/chat/completions", strings.NewReader(chatBody))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+sampleTenantKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body)
}

// checkAdapterServes checks that the adapter's APIServices are Available, that the external
// metric of the gateways' queue for the ProviderQuota llama answers through the aggregator, and
// that the sample HPA llama reads it.
func checkAdapterServes(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	c.Kubectl(t, "wait", "--for=condition=Available", "--timeout="+settle.String(),
		"apiservice/v1beta1.custom.metrics.k8s.io", "apiservice/v1beta2.custom.metrics.k8s.io", "apiservice/v1beta1.external.metrics.k8s.io")
	// The aggregator verifies the adapter with the CA the manager issued its certificate from.
	checkAPIServicesTLS(t, c, apiServiceTLS{CABundle: servingCA(t, ctx, c)})
	external := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + installedNamespace + "/" + metrics.QueueDepth
	poll.Until(t, settle, "the gateways' "+metrics.QueueDepth+" for llama through the aggregator", func() bool {
		var list emv1beta1.ExternalMetricValueList
		return getJSON(ctx, c, external, metrics.LabelProviderQuota+"=llama", &list) == nil && len(list.Items) > 0
	})
	var h *autoscalingv2.HorizontalPodAutoscaler
	poll.Until(t, settle, "the HPA llama to read a metric", func() bool {
		h = hpaOf(t, ctx, c, installedNamespace, "llama")
		for _, m := range h.Status.CurrentMetrics {
			if m.External != nil && m.External.Current.AverageValue != nil {
				return true
			}
		}
		return false
	})
	t.Logf("the HPA llama reads %+v", h.Status.CurrentMetrics)
}

// servingCA returns the CA the manager keeps in the Secret sluice-serving-cert.
func servingCA(t *testing.T, ctx context.Context, c *cluster.Cluster) []byte {
	t.Helper()
	secret, err := c.Clientset.CoreV1().Secrets(installedNamespace).Get(ctx, servingCertSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret.Data["ca.crt"]) == 0 {
		t.Fatalf("the Secret %s holds no ca.crt", servingCertSecret)
	}
	return secret.Data["ca.crt"]
}

// checkManagerMetricsVerified reaches each manager Pod's /metrics over TLS verified with the
// install's CA, for the name of the manager's metrics Service, as a ServiceMonitor does, and is
// told to authenticate: the certificate is the one the manager issued, and the metrics are not
// open.
func checkManagerMetricsVerified(t *testing.T, ctx context.Context, c *cluster.Cluster, manager string) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(servingCA(t, ctx, c))
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: managerMetricsName}}}
	pods, err := c.Clientset.CoreV1().Pods(installedNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + manager})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		url := "https://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/metrics"
		poll.Until(t, settle, "a 401 from the manager's /metrics over verified TLS at "+url, func() bool {
			resp, err := client.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusUnauthorized
		})
	}
}
