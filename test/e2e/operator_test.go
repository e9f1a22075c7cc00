package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/controllers"
	"github.com/sluicehq/sluice/test/cluster"
	"github.com/sluicehq/sluice/test/poll"
	"github.com/sluicehq/sluice/test/proc"
)

// Two of the keys config/samples holds: the tenant key the test calls with, and the provider's.
const (
	sampleTenantKey   = "sk-acme-alice-0123456789abcdef0123456789"
	sampleProviderKey = "sk-provider-example"
)

// sampleKeys are every key in config/samples, none of which may leave its Secret.
var sampleKeys = []string{sampleTenantKey, "sk-globex-bob-0123456789abcdef0123456789", "sk-initech-carol-0123456789abcdef0123456789", sampleProviderKey}

// TestOperator applies the CRDs and config/samples to a real API server with kubectl, runs the
// manager as a process, runs a real gateway on the configuration Secret the manager wrote, sends
// it traffic, and reads what a person would: kubectl describe and kubectl get.
func TestOperator(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", "../../config/crd")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "create", "namespace", "sluice")
	c.Kubectl(t, "apply", "--server-side", "-n", "sluice", "-k", "../../config/samples")

	// The sample provider is the lab's simulated account on a fixed port; point it at this test's.
	up := newUpstream(t)
	c.Kubectl(t, "patch", "-n", "sluice", "pq", "openai", "--type=merge", "-p", `{"spec":{"baseURL":"`+up.URL+`/v1"}}`)

	// The gateway's admin address is chosen now, so the manager polls it from its start: until
	// the gateway runs, the manager reports it unreachable.
	api, admin := freeAddr(t), freeAddr(t)
	manager := startManager(t, c, "http://"+admin+"/admin/usage")

	describeOpenAI := waitDescribe(t, c, "pq", "openai", `Reason:\s+Compiled`, `Reason:\s+GatewayUnreachable`)
	mustContain(t, describeOpenAI, "the hosted provider before the gateway runs",
		`Type:\s+Ready`, `Status:\s+True`, `Reason:\s+Compiled`, `Type:\s+UsageReported`, `Reason:\s+GatewayUnreachable`,
		`Requests Per Minute:\s+1425`, `Max In Flight:\s+190`)
	describeLlama := waitDescribe(t, c, "pq", "llama", `Reason:\s+ScaledToZero`)
	mustContain(t, describeLlama, "the self-hosted provider without a Pod, configured and scaled to zero",
		`Reason:\s+Compiled\s+Status:\s+True\s+Type:\s+Ready`, `Reason:\s+ScaledToZero\s+Status:\s+False\s+Type:\s+Active`, `Ready Pods:\s+0`)

	dir := t.TempDir()
	if cfg := writeConfigSecret(t, c, dir, up.URL); len(cfg.Providers) != 3 || len(cfg.Tenants) != 4 {
		t.Errorf("config.yaml has %d providers and %d tenants; want the samples' 3 and 4", len(cfg.Providers), len(cfg.Tenants))
	}
	g := startGatewayOn(t, filepath.Join(dir, "config.yaml"), api, admin)
	for range 3 {
		if a := g.post(t, "/v1/chat/completions", sampleTenantKey, chatBody); a.status != http.StatusOK {
			t.Fatalf("a call with the sample tenant's key: %d %s", a.status, a.body)
		}
	}

	describeOpenAI = waitDescribe(t, c, "pq", "openai", `Reason:\s+GatewaysReported`, `Requests Last Minute:\s+3\n`)
	mustContain(t, describeOpenAI, "the hosted provider's usage",
		`Reason:\s+GatewaysReported`, `Requests Last Minute:\s+3\n`, `Tokens Last Minute:\s+30\n`,
		`In Flight:\s+0\n`, `Queued:\s+0\n`, `Throttles:\s+0\n`, `Spend This Month:\s+0\.00009\n`, `Last Usage Time:`)
	describePro := waitDescribe(t, c, "tp", "enterprise", `Spent This Period:`)
	mustContain(t, describePro, "the plan's usage", `Reason:\s+Compiled`, `Reason:\s+GatewaysReported`,
		`Tenant Count:\s+1`, `Spent This Period:\s+0\.00009\n`, `Budget Remaining:\s+4999\.99991\n`, `Resets At:`)

	mustContain(t, c.Kubectl(t, "get", "pq", "-n", "sluice"), "kubectl get pq",
		`NAME\s+RPM\s+RPM-USED\s+TPM\s+TPM-USED\s+IN-FLIGHT\s+QUEUED\s+ENGINE\s+PODS\s+GPUS\s+READY\s+AGE\n`,
		`llama\s+0\s+0\s+0\s+0\s+vllm\s+(0\s+0\s+)?True\s+\S+\n`, // no RPM or TPM limit: both empty; no Pod ready yet
		`openai\s+1425\s+3\s+285000\s+30\s+0\s+0\s+True\s+\S+\n`)
	mustContain(t, c.Kubectl(t, "get", "pq", "-n", "sluice", "-o", "wide"), "kubectl get pq -o wide",
		`MAX-IN-FLIGHT`, `REASON\s+ACTIVE`, `llama.*\sCompiled\s+False\s`, `\s190\s`)
	mustContain(t, c.Kubectl(t, "get", "tp", "-n", "sluice"), "kubectl get tp",
		`NAME\s+TENANTS\s+BUDGET\s+SPENT\s+RESETS\s+READY\s+AGE\n`, `enterprise\s+1\s+5000\s+0\.00009\s+\S+\s+True\s+\S+\n`, `free\s+1\s+0\s+True\s+\S+\n`)

	// A ready Pod gives the self-hosted provider its capacity: 1 GPU × 8 calls.
	c.Kubectl(t, "run", "-n", "sluice", "llama-0", "--image=vllm", "--labels=app=llama", "--restart=Never")
	c.Kubectl(t, "patch", "-n", "sluice", "pod", "llama-0", "--subresource=status", "--type=merge",
		"-p", `{"status":{"podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.9"}],"conditions":[{"type":"Ready","status":"True"}]}}`)
	// The Pod's address is a new configuration, which the gateway, on a copy of the first, never
	// loads: Ready says so, naming it, until its configuration follows the Secrets as a Pod's does.
	describeLlama = waitDescribe(t, c, "pq", "llama", `Ready Pods:\s+1\n`, `Reason:\s+GatewaysBehind`)
	mustContain(t, describeLlama, "the self-hosted provider with a ready Pod, before the gateway loads it",
		`Message:\s+Compiled, but 1 of the gateways that answered has not loaded this configuration yet: http://`+regexp.QuoteMeta(admin),
		`Reason:\s+GatewaysBehind\s+Status:\s+False\s+Type:\s+Ready`)
	c.MountProjected(t, "sluice", cluster.Projection{Secrets: controllers.ConfigSecretNames("sluice-gateway-config"),
		OptionalConfigMaps: controllers.RecordConfigMapNames("sluice-gateway-config")}, dir, "config.yaml")
	describeLlama = waitDescribe(t, c, "pq", "llama", `Ready Pods:\s+1\n`, `Reason:\s+Compiled`)
	mustContain(t, describeLlama, "the self-hosted provider with a ready Pod",
		`Reason:\s+Compiled`, `Reason:\s+PodsReady\s+Status:\s+True\s+Type:\s+Active`, `Max In Flight:\s+8\n`, `Ready Pods:\s+1\n`, `Ready GPUs:\s+1\n`)

	events := c.Kubectl(t, "get", "events", "-n", "sluice", "-o", "yaml")
	mustContain(t, events, "events", `ConfigurationWritten`, `ScaledToZero`, `GatewaysBehind`)
	seen := map[string]string{
		"describe pq": c.Kubectl(t, "describe", "pq", "-n", "sluice"),
		"describe tp": c.Kubectl(t, "describe", "tp", "-n", "sluice"),
		"get pq,tp":   c.Kubectl(t, "get", "pq,tp", "-n", "sluice", "-o", "yaml"),
		"events":      events,
		"manager log": manager.Log(),
	}
	for what, text := range seen {
		for _, key := range sampleKeys {
			if strings.Contains(text, key) {
				t.Errorf("%s holds a key (%.8s...)", what, key)
			}
		}
	}
}

// startManager runs the manager on the cluster's namespace sluice, polling one gateway's usage
// with the gateways' admin token, with more flags if given.
func startManager(t *testing.T, c *cluster.Cluster, usageURL string, flags ...string) *proc.Process {
	t.Helper()
	args := []string{"--namespace", "sluice", "--gateway-usage-urls", usageURL, "--usage-interval", "500ms",
		"--gateway-admin-token-file", adminTokenFile(t),
		"--metrics-bind-address", "0", "--health-probe-bind-address", freeAddr(t)}
	cmd := exec.Command(managerBin, append(args, flags...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return proc.Start(t, "manager", cmd)
}

// writeConfigSecret waits until the configuration Secret the manager writes calls the upstream,
// writes the items of it and its tenant Secrets (config.yaml, the providers' key files and the
// tenant files) and of the record's ConfigMaps written so far into dir, as a gateway Pod's
// projected volume mounts them, and returns the configuration, once it loads.
func writeConfigSecret(t *testing.T, c *cluster.Cluster, dir, upstreamURL string) *gatewayv1.Config {
	t.Helper()
	var cfg *gatewayv1.Config
	var items map[string][]byte
	poll.Until(t, processWait, "the configuration Secrets to call the test's upstream and load", func() bool {
		items = configItems(t, c)
		if !strings.Contains(string(items["config.yaml"]), upstreamURL) {
			return false
		}
		writeConfigItems(t, dir, items)
		var err error
		cfg, err = gatewayv1.Load(filepath.Join(dir, "config.yaml"))
		return err == nil // else a tenant Secret was rewritten between two reads
	})
	for name, data := range items {
		for _, key := range sampleKeys {
			if !strings.HasSuffix(name, ".key") && strings.Contains(string(data), key) {
				t.Errorf("%s holds a key (%.8s...); want the tenants' hashes and the provider's key file only", name, key)
			}
		}
	}
	return cfg
}

// writeConfigItems writes the items of the configuration's Secrets into dir.
func writeConfigItems(t *testing.T, dir string, items map[string][]byte) {
	t.Helper()
	for name, data := range items {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// configItems returns the items of the configuration Secret, of its tenant Secrets and of the
// record's ConfigMaps in the namespace sluice, leaving out one not written yet.
func configItems(t *testing.T, c *cluster.Cluster) map[string][]byte {
	t.Helper()
	assets, err := cluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	get := func(kind, name string, into any) bool {
		out, err := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", c.Kubeconfig,
			"get", kind, "-n", "sluice", name, "-o", "json").Output()
		return err == nil && json.Unmarshal(out, into) == nil
	}
	items := map[string][]byte{}
	for _, name := range controllers.ConfigSecretNames("sluice-gateway-config") {
		var secret struct {
			Data map[string][]byte `json:"data"`
		}
		if get("secret", name, &secret) {
			maps.Copy(items, secret.Data)
		}
	}
	for _, name := range controllers.RecordConfigMapNames("sluice-gateway-config") {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if get("configmap", name, &cm) {
			for item, v := range cm.Data {
				items[item] = []byte(v)
			}
		}
	}
	return items
}

// waitDescribe waits until kubectl describe of one object matches every one of the patterns, and
// returns its output.
func waitDescribe(t *testing.T, c *cluster.Cluster, kind, name string, patterns ...string) string {
	t.Helper()
	var out string
	deadline := time.Now().Add(60 * time.Second)
	for {
		out = c.Kubectl(t, "describe", kind, "-n", "sluice", name)
		if matchesAll(out, patterns) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for kubectl describe %s %s to match %q; it shows:\n%s", kind, name, patterns, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func matchesAll(s string, patterns []string) bool {
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(s) {
			return false
		}
	}
	return true
}

// mustContain fails the test for each pattern the text does not match.
func mustContain(t *testing.T, text, what string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(text) {
			t.Errorf("%s: want a match of %q in:\n%s", what, p, text)
		}
	}
}
