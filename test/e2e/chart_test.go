package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/test/cluster"
)

const chartDir = repoRoot + "/charts/sluice"

// helm runs helm, built from the module's tool dependency, in the repository's root, and returns
// its output and error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "helm"}, args...)...)
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stderr.String(), err
	}
	return stdout.String(), nil
}

func skipWithoutHelm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds helm from the module's tool dependency; skipped with -short")
	}
}

// TestChartLints runs helm lint, strictly.
func TestChartLints(t *testing.T) {
	skipWithoutHelm(t)
	if out, err := helm(t, "lint", "--strict", "charts/sluice"); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
}

// TestChartRefusesBadValues checks that values.schema.json stops bad values at install.
func TestChartRefusesBadValues(t *testing.T) {
	skipWithoutHelm(t)
	for _, set := range []string{
		"gateway.replicas=0",
		"gateway.replicas=two",
		"redis.address=redis",
		"redis.failMode=sometimes",
		"redis.passwordSecret=Not_A_Secret",
		"redis.tls.caSecret=Not_A_Secret",
		"redis.tls.verify=false",
		"redis.tls.caSecret=redis-ca",      // without redis.tls.enabled, which would mean no TLS
		"redis.username=sluice",            // without a password, with which a user logs in
		"redis.sentinel.masterName=sluice", // without the sentinels
		"redis.sentinel.masterName=sluice,redis.sentinel.addresses={s:26379},redis.cluster.addresses={c:6379}", // two forms
		"redis.cluster.addresses={c:6379},redis.db=1",                                                          // a Cluster has only database 0
		"redis.sentinel.addresses={sentinel}",
		"manager.image.pullPolicy=Sometimes",
		"manager.watchNamespace=Not_A_Namespace",
		"gateway.resources.requests.cpu=lots",
		"gateway.server.readTimeout=soon",
		"gateway.server.maxBodyBytes=0",
		"gateway.server.maxBodyByte=1",
		"gateway.jobs.workers=0",
		"metricsAdapter.scrapeInterval=often",
		"metricsAdapter.replicas=0",
		"tls.caBundle=QUJD",                   // without the Secret of the certificate it verifies
		"tls.secret=adapter-cert",             // without the caBundle that verifies it
		"tls.issuerRef.kind=ClusterIssuer",    // without a name
		"metricsAdapter.tls.certManager=true", // the serving certificate's values are tls's
		"networkPolicy.enabled=maybe",
		"manager.replicas=0",
		"manager.nodeSelector.pool=1", // a label's value is a string
		"gateway.tolerations[0].operator=Sometimes",
		"metricsAdapter.affinity.nodeAfinity.x=y",        // misspelt
		"manager.topologySpreadConstraints[0].maxSkew=1", // without topologyKey and whenUnsatisfiable
		"gateway.imagePullSecrets[0].name=Not_A_Secret",
		"metricsAdapter.priorityClassName=Not_A_Class",
		"manager.podAnnotations.not a key=x",
		"gateway.podLabels.team=not a value",
		`metricsAdapter.podLabels.app\.kubernetes\.io/name=other`, // the selector's
		"gateway.podDisruptionBudget=true",                        // no such value
		"gatway.replicas=2",
	} {
		if out, err := helm(t, "template", "sluice", "charts/sluice", "--set", set); err == nil || !strings.Contains(out, "schema") {
			t.Errorf("helm template --set %s: %v, %.200s; want the schema to refuse it", set, err, out)
		}
	}
}

// TestChartRendersIntegersAsIntegers renders the chart with its defaults and with large whole
// numbers given in a values file, as Helm reads them (as floats; --set would read integers): no
// number comes out in a float's exponent form, which a Pod's integer flag refuses, and the
// adapter's flags hold the numbers given.
func TestChartRendersIntegersAsIntegers(t *testing.T) {
	skipWithoutHelm(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	err := os.WriteFile(values, []byte(`manager: {replicas: 3, tolerations: [{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 1000000}]}
gateway: {replicas: 3, servicePort: 8080, server: {maxBodyBytes: 20971520}, jobs: {maxBytesPerTenant: 268435456}}
redis: {db: 15}
metricsAdapter: {replicas: 3, maxScrapeBytes: 1000000, maxScrapeSeries: 5000000}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	float := regexp.MustCompile(`[0-9]e[+-][0-9]`)
	for name, args := range map[string][]string{"the defaults": nil, "a values file": {"-f", values}} {
		out, err := helm(t, append([]string{"template", "sluice", "charts/sluice"}, args...)...)
		if err != nil {
			t.Fatalf("helm template with %s: %v\n%s", name, err, out)
		}
		if at := float.FindStringIndex(out); at != nil {
			t.Errorf("helm template with %s renders a float: %q", name, out[max(at[0]-60, 0):at[1]])
		}
	}
	out, _ := helm(t, "template", "sluice", "charts/sluice", "-f", values, "-s", "templates/metrics-adapter.yaml")
	for _, flag := range []string{"--scrape-max-bytes=1000000", "--scrape-max-series=5000000"} {
		if !strings.Contains(out, flag) {
			t.Errorf("the adapter's Deployment has no %s", flag)
		}
	}
	out, _ = helm(t, "template", "sluice", "charts/sluice", "-f", values, "-s", "templates/manager.yaml")
	for _, field := range []string{"replicas: 3", "tolerationSeconds: 1000000"} {
		if !strings.Contains(out, field) {
			t.Errorf("the manager's Deployment has no %s", field)
		}
	}
}

// TestChartRegistersEachMetricsGroupOnItsOwn renders the adapter's APIServices with each group on
// and off: custom.metrics.k8s.io as v1beta1 and v1beta2, external.metrics.k8s.io as v1beta1, so
// that a cluster where KEDA or prometheus-adapter owns one group keeps it.
func TestChartRegistersEachMetricsGroupOnItsOwn(t *testing.T) {
	skipWithoutHelm(t)
	all := []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"}
	for _, tc := range []struct {
		custom, external bool
		want             []string
	}{
		{true, true, all},
		{true, false, all[:2]},
		{false, true, all[2:]},
		{false, false, nil},
	} {
		out, err := helm(t, "template", "sluice", "charts/sluice", "-s", "templates/metrics-adapter.yaml",
			"--set", fmt.Sprintf("metricsAdapter.apiServices.custom=%t,metricsAdapter.apiServices.external=%t", tc.custom, tc.external))
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^kind: APIService\nmetadata:\n  name: (\S+)`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("custom %t, external %t: APIServices %v; want %v", tc.custom, tc.external, got, tc.want)
		}
	}
}

// TestChartRollsGatewaysOnStoreChange checks that a change of how the gateways reach Redis, or of
// their server or jobs settings, changes their Pod template, so that they restart with it: they
// read those only when they start.
func TestChartRollsGatewaysOnStoreChange(t *testing.T) {
	skipWithoutHelm(t)
	template := func(args ...string) string {
		out, err := helm(t, append([]string{"template", "sluice", "charts/sluice", "-s", "templates/gateway.yaml"}, args...)...)
		if err != nil {
			t.Fatalf("helm template %v: %v\n%s", args, err, out)
		}
		return out
	}
	plain := template()
	for _, set := range []string{"redis.tls.enabled=true", "redis.passwordSecret=redis-auth", "redis.address=other:6379",
		"gateway.server.readTimeout=2m", "gateway.jobs.workers=4"} { // settings the gateways read only when they start
		if template("--set", set) == plain {
			t.Errorf("--set %s leaves the gateways' Deployment as it was; want a new Pod template", set)
		}
	}
}

// TestChartApplies applies helm template's output to a real API server: with the default values
// in sluice-system, labelled for the restricted Pod Security Standard, with Redis and the adapter
// off in another namespace, the manager watching a third, and with every scheduling value set in a
// fourth; and helm install's. It checks what each install made, that the Pods of the restricted
// namespaces are admitted, and what each manager may do.
func TestChartApplies(t *testing.T) {
	skipWithoutHelm(t)
	c := cluster.Start(t, cluster.Options{})
	createRestrictedNamespace(t, c, "sluice-system")
	c.Kubectl(t, "apply", "--server-side", "-f", render(t, "sluice", "sluice-system", "--include-crds"))
	deployments := checkDeployments(t, c, "sluice-system", "sluice-manager", "sluice-gateway", "sluice-metrics-adapter")
	checkRestricted(t, c, "sluice-system", deployments)
	checkBaseConfig(t, c, "sluice-system", "sluice-manager-base-config", deployments["sluice-gateway"])
	checkConfigProjected(t, deployments["sluice-gateway"])
	checkAdminTokenMounted(t, deployments, "sluice-gateway-admin-token")
	adminTokenOf(t, c, "sluice-system", "sluice-gateway-admin-token")
	if got := *deployments["sluice-gateway"].Spec.Replicas; got != 2 {
		t.Errorf("gateway replicas = %d; want 2", got)
	}
	c.Kubectl(t, "get", "pdb/sluice-gateway", "service/sluice-gateway", "service/sluice-metrics-adapter", "-n", "sluice-system")
	checkGatewayNetworkPolicy(t, c, "sluice-system", "sluice-gateway")
	checkAdapterAvailability(t, c, "sluice-system", "sluice-metrics-adapter")
	checkAPIServicesTLS(t, c, apiServiceTLS{})
	checkChartAlertsAndTLS(t, c)

	// Redis off: one gateway with an in-memory store, in the namespace the manager watches.
	c.Kubectl(t, "create", "namespace", "memory")
	c.Kubectl(t, "create", "namespace", "team-a")
	c.Kubectl(t, "apply", "--server-side", "-f", render(t, "memory", "memory",
		"--set", "redis.enabled=false", "--set", "metricsAdapter.enabled=false", "--set", "manager.watchNamespace=team-a"))
	managers := checkDeployments(t, c, "memory", "memory-sluice-manager")
	gateways := checkDeployments(t, c, "team-a", "memory-sluice-gateway")
	checkAdminTokenMounted(t, managers, "memory-sluice-gateway-admin-token")
	checkAdminTokenMounted(t, gateways, "memory-sluice-gateway-admin-token")
	if adminTokenOf(t, c, "memory", "memory-sluice-gateway-admin-token") != adminTokenOf(t, c, "team-a", "memory-sluice-gateway-admin-token") {
		t.Error("the manager's copy of the admin token, in the release's namespace, is not the gateways'")
	}
	checkBaseConfig(t, c, "memory", "memory-sluice-manager-base-config", gateways["memory-sluice-gateway"])
	if out := c.Kubectl(t, "get", "deployments,pdb", "-n", "memory", "-o", "name"); strings.Contains(out, "adapter") || strings.Contains(out, "poddisruptionbudget") {
		t.Errorf("with the adapter off and one gateway, kubectl get deployments,pdb shows:\n%s", out)
	}

	// helm install itself, as the chart's README says, beside the two, with a Redis that wants a user, a
	// password and TLS with a CA of its own.
	if out, err := helm(t, "install", "installed", "charts/sluice", "--kubeconfig", c.Kubeconfig, "-n", "installed", "--create-namespace",
		"--set", "redis.address=redis.installed.svc:6379", "--set", "redis.username=sluice", "--set", "redis.passwordSecret=redis-auth",
		"--set", "redis.tls.enabled=true", "--set", "redis.tls.caSecret=redis-ca", "--set", "metricsAdapter.enabled=false"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	installed := checkDeployments(t, c, "installed", "installed-sluice-manager", "installed-sluice-gateway")
	cfg := checkBaseConfig(t, c, "installed", "installed-sluice-manager-base-config", installed["installed-sluice-gateway"])
	if r := cfg.Store.Redis; r.Username != "sluice" || r.PasswordFile == "" || r.TLS == nil || r.TLS.CAFile == "" {
		t.Errorf("the base configuration's Redis store is %+v; want the user, a password file and TLS with a CA file", r)
	}
	// An upgrade keeps the admin token the install drew, which the running Pods hold.
	token := adminTokenOf(t, c, "installed", "installed-sluice-gateway-admin-token")
	if out, err := helm(t, "upgrade", "installed", "charts/sluice", "--kubeconfig", c.Kubeconfig, "-n", "installed", "--reuse-values",
		"--set", "gateway.replicas=3"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if adminTokenOf(t, c, "installed", "installed-sluice-gateway-admin-token") != token {
		t.Error("helm upgrade drew a new admin token; want the one the install made")
	}

	checkChartPlacement(t, c)

	checkAccess(t, c, append(managerAccess("system:serviceaccount:sluice-system:sluice-manager", "sluice-system"),
		managerAccess("system:serviceaccount:memory:memory-sluice-manager", "team-a")...))
	checkAccess(t, c, append(servingCertAccess("system:serviceaccount:sluice-system:sluice-manager", "sluice-system", true),
		servingCertAccess("system:serviceaccount:memory:memory-sluice-manager", "memory", false)...))
	checkAccess(t, c, []access{
		// Its own namespace is not one it was told to watch: there it writes its serving
		// certificate only.
		{"system:serviceaccount:memory:memory-sluice-manager", "update secrets/sluice-gateway-config -n memory", false},
		{"system:serviceaccount:memory:memory-sluice-manager", "get secrets -n sluice-system", false},
	})
}

// checkChartAlertsAndTLS applies the release sluice again, as an upgrade would, with the
// PrometheusRule and cert-manager's certificate for the adapter, then with a certificate Secret
// of one's own and its caBundle, and checks what each made.
func checkChartAlertsAndTLS(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	applyOptionalCRDs(t, c)
	c.Kubectl(t, "apply", "--server-side", "-f", render(t, "sluice", "sluice-system",
		"--set", "prometheusRule.enabled=true", "--set", "tls.certManager=true"))
	checkAlertsApplied(t, c, "sluice-system", "sluice")
	checkAPIServicesTLS(t, c, apiServiceTLS{InjectCAFrom: "sluice-system/sluice-serving-cert"})
	c.Kubectl(t, "get", "certificate/sluice-serving-cert", "issuer/sluice-selfsigned", "-n", "sluice-system")
	if !adapterMountsSecret(t, c, "sluice-system", "sluice-metrics-adapter", "sluice-serving-cert") {
		t.Error("with cert-manager, the adapter does not serve the certificate's Secret")
	}

	ca := testCA(t)
	c.Kubectl(t, "apply", "--server-side", "-f", render(t, "sluice", "sluice-system",
		"--set", "tls.secret=adapter-cert", "--set", "tls.caBundle="+base64.StdEncoding.EncodeToString(ca)))
	checkAPIServicesTLS(t, c, apiServiceTLS{CABundle: ca})
	if !adapterMountsSecret(t, c, "sluice-system", "sluice-metrics-adapter", "adapter-cert") {
		t.Error("with tls.secret, the adapter does not serve that Secret")
	}
}

// createRestrictedNamespace creates a namespace and labels it for the restricted Pod Security
// Standard, as the chart's README says to before installing.
func createRestrictedNamespace(t *testing.T, c *cluster.Cluster, namespace string) {
	t.Helper()
	c.Kubectl(t, "create", "namespace", namespace)
	c.Kubectl(t, append([]string{"label", "namespace", namespace}, restrictedLabels...)...)
}

// checkChartPlacement applies a release, placed, with every component's scheduling values set
// and two managers, to a namespace of its own, and checks that the API server takes the
// Deployments, that their Pods meet the restricted standard with the PriorityClass named, and that
// the managers have their PodDisruptionBudget. The adapter registers no APIService, which would
// take the release sluice's.
func checkChartPlacement(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	values, _ := writePlacementValues(t)
	createRestrictedNamespace(t, c, "placed")
	c.Kubectl(t, "create", "priorityclass", "sluice-high", "--value=1000")
	c.Kubectl(t, "apply", "--server-side", "-f", render(t, "placed", "placed", "-f", values, "--set", "manager.replicas=2",
		"--set", "metricsAdapter.apiServices.custom=false", "--set", "metricsAdapter.apiServices.external=false"))
	deployments := checkDeployments(t, c, "placed", "placed-sluice-manager", "placed-sluice-gateway", "placed-sluice-metrics-adapter")
	for name, d := range deployments {
		if spec := d.Spec.Template.Spec; spec.PriorityClassName != "sluice-high" || len(spec.Tolerations) != 1 || len(spec.TopologySpreadConstraints) != 2 {
			t.Errorf("deployment placed/%s is placed by %q, %v and %v; want the values'", name, spec.PriorityClassName, spec.Tolerations, spec.TopologySpreadConstraints)
		}
	}
	checkRestricted(t, c, "placed", deployments)
	c.Kubectl(t, "get", "pdb/placed-sluice-manager", "-n", "placed")
}

// render writes helm template's output for a release and returns the file.
func render(t *testing.T, release, namespace string, args ...string) string {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, "charts/sluice", "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return writeManifest(t, out)
}

// TestChartCopiesAreGenerated checks that the chart's CRDs and the manager's RBAC rules are
// those make manifests generates, as make chart-manifests copies them.
func TestChartCopiesAreGenerated(t *testing.T) {
	copies := map[string]string{
		repoRoot + "/config/rbac/role.yaml":                                chartDir + "/files/manager-role.yaml",
		repoRoot + "/config/components/prometheusrule/prometheusrule.yaml": chartDir + "/files/prometheusrule.yaml",
	}
	bases, _ := filepath.Glob(repoRoot + "/config/crd/bases/*.yaml")
	for _, base := range bases {
		copies[base] = chartDir + "/crds/" + filepath.Base(base)
	}
	charted, _ := filepath.Glob(chartDir + "/crds/*")
	if len(charted) != len(bases) || len(bases) == 0 {
		t.Errorf("charts/sluice/crds has %d files, config/crd/bases %d; run make manifests", len(charted), len(bases))
	}
	for from, to := range copies {
		want, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(to); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not a copy of %s (%v); run make manifests", to, from, err)
		}
	}
}

// TestChartValuesAreDocumented checks that the chart's README names every value.
func TestChartValuesAreDocumented(t *testing.T) {
	data, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(chartDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := valueKeys("", values)
	if len(keys) < 10 {
		t.Fatalf("found only %v in values.yaml", keys)
	}
	for _, key := range keys {
		if !strings.Contains(string(readme), "`"+key+"`") {
			t.Errorf("charts/sluice/README.md does not name the value %s", key)
		}
	}
}

// valueKeys lists the dotted paths of values' leaves; resources, selectors and empty maps count as
// one value.
func valueKeys(prefix string, values map[string]any) []string {
	var keys []string
	for k, v := range values {
		path := prefix + k
		if m, ok := v.(map[string]any); ok && len(m) > 0 && k != "resources" && !strings.HasSuffix(k, "Selector") {
			keys = append(keys, valueKeys(path+".", m)...)
			continue
		}
		keys = append(keys, path)
	}
	slices.Sort(keys)
	return keys
}
