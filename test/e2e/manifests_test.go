package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/controllers"
	"github.com/sluicehq/sluice/test/cluster"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// serviceMonitorCRD is the least of the Prometheus Operator's ServiceMonitor CRD that takes the
// component's objects, so that they are really applied.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestManifestsApply applies config/default and config/samples to a real API server, as a person
// would with kubectl, then the ServiceMonitor and PrometheusRule components over minimal CRDs,
// the OTLP tracing component and the adapter's certificate components, and checks the
// Deployments' hardening, the base configuration, that the namespace enforces the restricted Pod
// Security Standard and admits the Deployments' Pods, the gateways' NetworkPolicy, the adapter's
// replicas and PodDisruptionBudget, how the aggregator verifies the adapter, and, with kubectl
// auth can-i, what the manager's and the adapter's service accounts, and the HPA controller, may
// and may not do.
func TestManifestsApply(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.Kubectl(t, "apply", "--server-side", "-k", repoRoot+"/config/default")
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/providerquotas.sluice.dev", "crd/tenantplans.sluice.dev")
	c.Kubectl(t, "apply", "--server-side", "-n", "sluice-system", "-k", repoRoot+"/config/samples")
	if out := c.Kubectl(t, "get", "pq,tp,hpa", "-n", "sluice-system"); !strings.Contains(out, "openai") || !strings.Contains(out, "llama") || !strings.Contains(out, "pro") {
		t.Errorf("kubectl get pq,tp shows:\n%s\nwant the samples", out)
	}

	c.Kubectl(t, "apply", "--server-side", "-f", writeManifest(t, serviceMonitorCRD))
	c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
	applyOptionalCRDs(t, c)
	c.Kubectl(t, "apply", "--server-side", "-k", overlay(t, []string{"servicemonitor", "prometheusrule"}, "", map[string]string{}))
	if out := c.Kubectl(t, "get", "servicemonitors", "-n", "sluice-system", "-o", "name"); strings.Count(out, "servicemonitor") != 3 {
		t.Errorf("kubectl get servicemonitors shows:\n%s\nwant the gateway's, the manager's and the adapter's", out)
	}
	checkAlertsApplied(t, c, "sluice-system", "sluice")

	deployments := checkDeployments(t, c, "sluice-system", "sluice-manager", "sluice-gateway", "sluice-metrics-adapter")
	checkRestricted(t, c, "sluice-system", deployments)
	checkBaseConfig(t, c, "sluice-system", "sluice-base-config-", deployments["sluice-gateway"])
	checkConfigProjected(t, deployments["sluice-gateway"])
	checkAdminTokenMounted(t, deployments, "sluice-gateway-admin-token")
	checkGatewayMonitorSendsToken(t, c, "sluice-system", "sluice-gateway", "sluice-gateway-admin-token")
	if _, err := c.Clientset.CoreV1().Secrets("sluice-system").Get(context.Background(), "sluice-gateway-admin-token", metav1.GetOptions{}); err == nil {
		t.Error("config/default makes the Secret sluice-gateway-admin-token; want the token the user creates, not one in the repository")
	}
	checkRedisComponents(t, c)
	checkTracingComponent(t, c)
	checkGatewayNetworkPolicy(t, c, "sluice-system", "sluice-gateway")
	checkAdapterAvailability(t, c, "sluice-system", "sluice-metrics-adapter")
	checkAdapterTLSComponents(t, c)

	const (
		manager = "system:serviceaccount:sluice-system:sluice-manager"
		adapter = "system:serviceaccount:sluice-system:sluice-metrics-adapter"
		hpa     = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	)
	checkAccess(t, c, append(append(managerAccess(manager, "sluice-system"), servingCertAccess(manager, "sluice-system", true)...),
		access{adapter, "list pods -n default", true},
		access{adapter, "watch providerquotas.sluice.dev -n default", true},
		access{adapter, "get configmaps/extension-apiserver-authentication -n kube-system", true},
		access{adapter, "get secrets -n sluice-system", false},
		access{hpa, "get secrets -n default", false},
	))
	// kubectl auth can-i finds a resource through discovery, which has no custom metrics while
	// no adapter runs; the API server answers the same question asked directly.
	if !allowed(t, c, hpa, authorizationv1.ResourceAttributes{Verb: "get", Group: "custom.metrics.k8s.io", Resource: "pods", Namespace: "default"}) {
		t.Errorf("%s may not get custom metrics; want it may", hpa)
	}
}

// checkAdapterTLSComponents applies config/default with each way of verifying the metrics adapter
// config/README.md names, and checks the APIServices and the adapter's Deployment: first
// metrics-adapter-cert-manager (cert-manager's Certificate and CA injection), then
// metrics-adapter-tls with a caBundle patch, as its kustomization says to write it.
func checkAdapterTLSComponents(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	checkAPIServicesTLS(t, c, apiServiceTLS{})
	c.Kubectl(t, "apply", "--server-side", "-k", overlay(t, []string{"metrics-adapter-cert-manager"}, "", map[string]string{}))
	checkAPIServicesTLS(t, c, apiServiceTLS{InjectCAFrom: "sluice-system/sluice-serving-cert"})
	c.Kubectl(t, "get", "certificate/sluice-serving-cert", "issuer/sluice-selfsigned", "-n", "sluice-system")
	if !adapterMountsSecret(t, c, "sluice-system", "sluice-metrics-adapter", "sluice-serving-cert") {
		t.Error("with cert-manager, the adapter does not serve the certificate's Secret")
	}

	ca := testCA(t)
	patch := fmt.Sprintf("patches:\n  - target: {kind: APIService}\n    patch: '[{\"op\": \"add\", \"path\": \"/spec/caBundle\", \"value\": \"%s\"}]'\n",
		base64.StdEncoding.EncodeToString(ca))
	c.Kubectl(t, "apply", "--server-side", "-k", overlay(t, []string{"metrics-adapter-tls"}, patch, map[string]string{}))
	checkAPIServicesTLS(t, c, apiServiceTLS{CABundle: ca})
	if !adapterMountsSecret(t, c, "sluice-system", "sluice-metrics-adapter", "sluice-serving-cert") {
		t.Error("with metrics-adapter-tls, the adapter does not serve the Secret sluice-serving-cert")
	}
}

// allowed asks the API server whether user may do what, as kubectl auth can-i does.
func allowed(t *testing.T, c *cluster.Cluster, user string, what authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, ResourceAttributes: &what,
		Groups: []string{"system:serviceaccounts", "system:authenticated"},
	}}
	got, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// overlay writes a kustomization of config/default with these components, as a user would list
// them, and returns its directory. more is added to the kustomization; files are written beside it.
func overlay(t *testing.T, components []string, more string, files map[string]string) string {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes other directories by relative path only.
	config, err := filepath.Rel(dir, filepath.Join(root, "config"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "resources:\n  - " + config + "/default\ncomponents:\n"
	for _, c := range components {
		kustomization += "  - " + config + "/components/" + c + "\n"
	}
	files["kustomization.yaml"] = kustomization + more
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkRedisComponents renders config/default with the redis-password and redis-tls components
// and a base configuration naming their files, as the components say to do, and checks that the
// gateways mount the files.
func checkRedisComponents(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	base, err := os.ReadFile(repoRoot + "/config/manager/base-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	uncommented := strings.NewReplacer("# passwordFile:", "passwordFile:", "# tls:", "tls:").Replace(string(base))
	dir := overlay(t, []string{"redis-password", "redis-tls"},
		"configMapGenerator:\n  - {name: sluice-base-config, namespace: sluice-system, behavior: replace, files: [base-config.yaml]}\n",
		map[string]string{"base-config.yaml": uncommented})
	var gateway *appsv1.Deployment
	var cfg *gatewayv1.Config
	for _, doc := range strings.Split(c.Kubectl(t, "kustomize", dir), "\n---\n") {
		var object struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if err := yaml.Unmarshal([]byte(doc), &object); err != nil {
			t.Fatal(err)
		}
		switch {
		case object.Kind == "Deployment" && object.Metadata.Name == "sluice-gateway":
			gateway = &appsv1.Deployment{}
			if err := yaml.Unmarshal([]byte(doc), gateway); err != nil {
				t.Fatal(err)
			}
		case object.Kind == "ConfigMap" && strings.HasPrefix(object.Metadata.Name, "sluice-base-config"):
			if cfg, err = gatewayv1.Parse([]byte(object.Data["base-config.yaml"])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if gateway == nil || cfg == nil || cfg.Store.Redis == nil || cfg.Store.Redis.PasswordFile == "" || cfg.Store.Redis.TLS == nil {
		t.Fatalf("config/default with the Redis components: gateway %v, base configuration %+v; want both, naming a password file and TLS", gateway != nil, cfg)
	}
	checkStoreFilesMounted(t, cfg.Store, gateway)
}

// managerAccess is what the manager, watching namespace watched, must and must not be allowed.
func managerAccess(manager, watched string) []access {
	in := " -n " + watched
	return []access{
		{manager, "list secrets" + in, true},
		{manager, "watch secrets" + in, true},
		{manager, "create secrets" + in, true},
		{manager, "update secrets/sluice-gateway-config" + in, true},
		{manager, "update secrets/sluice-gateway-config-tenants-7" + in, true},
		{manager, "list configmaps" + in, true},
		{manager, "watch configmaps" + in, true},
		{manager, "create configmaps" + in, true},
		{manager, "update configmaps/sluice-gateway-config-record-0" + in, true},
		{manager, "update configmaps/sluice-gateway-config-record-7" + in, true},
		{manager, "list providerquotas.sluice.dev" + in, true},
		{manager, "list tenantplans.sluice.dev" + in, true},
		{manager, "patch providerquotas.sluice.dev --subresource=status" + in, true},
		{manager, "list pods" + in, true},
		{manager, "create leases.coordination.k8s.io" + in, true},
		{manager, "create events.events.k8s.io" + in, true},
		// Nothing outside its namespace, and no Secret written but its own.
		{manager, "get secrets -n default", false},
		{manager, "list secrets -A", false},
		{manager, "list providerquotas.sluice.dev -n default", false},
		{manager, "update secrets/acme-alice" + in, false},
		{manager, "update secrets" + in, false},
		{manager, "update secrets/sluice-gateway-config-tenants-8" + in, false},
		{manager, "update configmaps/sluice-gateway-config-record-8" + in, false},
		{manager, "update configmaps/sluice-base-config" + in, false},
		{manager, "delete configmaps/sluice-gateway-config-record-0" + in, false},
		{manager, "list configmaps -n default", false},
		{manager, "delete secrets/sluice-gateway-config" + in, false},
		{manager, "update providerquotas.sluice.dev" + in, false},
		{manager, "create pods" + in, false},
		{manager, "delete customresourcedefinitions.apiextensions.k8s.io", false},
	}
}

// servingCertAccess is what a manager may do for the serving certificate it issues in its own
// namespace, and for the CA it writes into the adapter's APIServices if injects: read the
// namespace's Secrets (cert-controller caches them) and write the certificate's only; write those
// APIServices only; and ask the API server who scrapes its metrics.
func servingCertAccess(manager, namespace string, injects bool) []access {
	in := " -n " + namespace
	return []access{
		{manager, "watch secrets" + in, true},
		{manager, "update secrets/sluice-serving-cert" + in, true},
		{manager, "update secrets/other" + in, false},
		{manager, "delete secrets/sluice-serving-cert" + in, false},
		{manager, "create tokenreviews.authentication.k8s.io", true},
		{manager, "create subjectaccessreviews.authorization.k8s.io", true},
		{manager, "update apiservices.apiregistration.k8s.io/v1beta1.custom.metrics.k8s.io", injects},
		{manager, "update apiservices.apiregistration.k8s.io/v1beta1.external.metrics.k8s.io", injects},
		{manager, "update apiservices.apiregistration.k8s.io/v1.apps", false},
		{manager, "delete apiservices.apiregistration.k8s.io/v1beta1.custom.metrics.k8s.io", false},
	}
}

// access is one question for kubectl auth can-i: may user do what ("VERB RESOURCE [FLAGS]")?
type access struct {
	user, what string
	want       bool
}

// checkAccess asks kubectl auth can-i each question, impersonating the user.
func checkAccess(t *testing.T, c *cluster.Cluster, cases []access) {
	t.Helper()
	assets, err := cluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		args := append([]string{"--kubeconfig", c.Kubeconfig, "auth", "can-i", "--as=" + tc.user}, strings.Fields(tc.what)...)
		out, err := exec.Command(filepath.Join(assets, "kubectl"), args...).Output()
		answer := strings.TrimSpace(string(out))
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && answer == "no") {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args[2:], " "), err, out)
		}
		if got := answer == "yes"; got != tc.want {
			t.Errorf("kubectl auth can-i %s as %s: %s; want %v", tc.what, tc.user, answer, tc.want)
		}
	}
}

// checkDeployments checks that the named Deployments of a namespace exist and carry resource
// requests, probes, Prometheus scrape annotations and the hardening every Pod of Sluice has, and
// returns them by name.
func checkDeployments(t *testing.T, c *cluster.Cluster, namespace string, names ...string) map[string]*appsv1.Deployment {
	t.Helper()
	found := map[string]*appsv1.Deployment{}
	for _, name := range names {
		d, err := c.Clientset.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("deployment %s/%s: %v", namespace, name, err)
			continue
		}
		found[name] = d
		for _, problem := range podProblems(&d.Spec.Template) {
			t.Errorf("deployment %s/%s: %s", namespace, name, problem)
		}
	}
	return found
}

// podProblems lists what a Pod template lacks.
func podProblems(pod *corev1.PodTemplateSpec) []string {
	var problems []string
	if pod.Annotations["prometheus.io/scrape"] != "true" || pod.Annotations["prometheus.io/port"] == "" {
		problems = append(problems, "no prometheus.io scrape annotations")
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		problems = append(problems, "Pod not runAsNonRoot")
	}
	for _, ct := range pod.Spec.Containers {
		problems = append(problems, containerProblems(ct)...)
	}
	return problems
}

func containerProblems(ct corev1.Container) []string {
	var problems []string
	if ct.Resources.Requests.Cpu().IsZero() || ct.Resources.Requests.Memory().IsZero() {
		problems = append(problems, ct.Name+": no CPU or memory request")
	}
	if ct.ReadinessProbe == nil || ct.LivenessProbe == nil {
		problems = append(problems, ct.Name+": no readiness or liveness probe")
	}
	sc := ct.SecurityContext
	switch {
	case sc == nil:
		problems = append(problems, ct.Name+": no securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		problems = append(problems, ct.Name+": privilege escalation allowed")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		problems = append(problems, ct.Name+": root filesystem writable")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		problems = append(problems, ct.Name+": capabilities not all dropped")
	}
	return problems
}

// checkBaseConfig checks that the manager's base configuration, in the ConfigMap whose name
// starts with prefix, is one the manager accepts, and that it fits the gateways: Redis told their
// number, or memory for a single gateway.
func checkBaseConfig(t *testing.T, c *cluster.Cluster, namespace, prefix string, gateway *appsv1.Deployment) *gatewayv1.Config {
	t.Helper()
	cms, err := c.Clientset.CoreV1().ConfigMaps(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if !strings.HasPrefix(cm.Name, prefix) {
			continue
		}
		cfg, err := gatewayv1.Parse([]byte(cm.Data["base-config.yaml"]))
		if err != nil {
			t.Fatalf("configmap %s: base-config.yaml: %v", cm.Name, err)
		}
		if gateway == nil {
			return cfg
		}
		checkStoreFilesMounted(t, cfg.Store, gateway)
		replicas := *gateway.Spec.Replicas
		switch {
		case cfg.Store.Type == gatewayv1.StoreRedis && cfg.Store.Redis.Replicas != replicas:
			t.Errorf("configmap %s: Redis store for %d replicas; the gateway Deployment has %d", cm.Name, cfg.Store.Redis.Replicas, replicas)
		case cfg.Store.Type == gatewayv1.StoreMemory && replicas != 1:
			t.Errorf("configmap %s: memory store for %d gateways; want one", cm.Name, replicas)
		}
		return cfg
	}
	t.Fatalf("no configmap %s* in %s", prefix, namespace)
	return nil
}

// checkStoreFilesMounted checks that each file the base configuration's Redis store reads (its
// password, the authorities of its certificate) is a Secret's key mounted into the gateway, so
// that no ConfigMap holds them.
func checkStoreFilesMounted(t *testing.T, store gatewayv1.Store, gateway *appsv1.Deployment) {
	t.Helper()
	if store.Redis == nil {
		return
	}
	files := []string{store.Redis.PasswordFile}
	if store.Redis.TLS != nil {
		files = append(files, store.Redis.TLS.CAFile)
	}
	for _, file := range files {
		if file != "" && !mountsSecretKey(gateway, file) {
			t.Errorf("the base configuration has the gateways read %s; the gateway %s mounts no Secret's key there", file, gateway.Name)
		}
	}
}

// checkConfigProjected checks that the gateway mounts every Secret of its configuration and every
// ConfigMap of its record, as the manager writes them, in one directory, where config.yaml finds
// the tenant files and the record files it names. The record's ConfigMaps are optional: the
// manager writes them only once it has polled the gateways.
func checkConfigProjected(t *testing.T, gateway *appsv1.Deployment) {
	t.Helper()
	var secrets, configMaps []string
	for _, v := range gateway.Spec.Template.Spec.Volumes {
		if v.Name != "config" || v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret != nil {
				secrets = append(secrets, src.Secret.Name)
			}
			if cm := src.ConfigMap; cm != nil {
				configMaps = append(configMaps, cm.Name)
				if cm.Optional == nil || !*cm.Optional {
					t.Errorf("the gateway %s needs the ConfigMap %s to start; want it optional", gateway.Name, cm.Name)
				}
			}
		}
	}
	want := controllers.ConfigSecretNames("sluice-gateway-config")
	slices.Sort(secrets)
	slices.Sort(want)
	if !slices.Equal(secrets, want) {
		t.Errorf("the gateway %s projects Secrets %q into its config volume; want %q", gateway.Name, secrets, want)
	}
	if want := controllers.RecordConfigMapNames("sluice-gateway-config"); !slices.Equal(configMaps, want) {
		t.Errorf("the gateway %s projects ConfigMaps %q into its config volume; want %q", gateway.Name, configMaps, want)
	}
}

// mountsSecretKey reports whether the gateway's container mounts a Secret's key at file.
func mountsSecretKey(gateway *appsv1.Deployment, file string) bool {
	pod := gateway.Spec.Template.Spec
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil || m.MountPath != filepath.Dir(file) {
				continue
			}
			for _, item := range v.Secret.Items {
				if item.Path == filepath.Base(file) {
					return true
				}
			}
		}
	}
	return false
}
