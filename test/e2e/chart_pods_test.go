package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// chartComponents maps each Deployment the chart renders, by its app.kubernetes.io/name, to the
// key of its values.
var chartComponents = map[string]string{
	"sluice-manager":         "manager",
	"sluice-gateway":         "gateway",
	"sluice-metrics-adapter": "metricsAdapter",
}

// chartObjects is what helm template rendered: its Deployments by app.kubernetes.io/name and its
// PodDisruptionBudgets by name.
type chartObjects struct {
	deployments map[string]*appsv1.Deployment
	budgets     map[string]*policyv1.PodDisruptionBudget
}

// renderObjects renders the release sluice in sluice-system with args and decodes its
// Deployments and PodDisruptionBudgets strictly, so that a field the API does not know fails.
func renderObjects(t *testing.T, args ...string) chartObjects {
	t.Helper()
	out, err := helm(t, append([]string{"template", "sluice", "charts/sluice", "--namespace", "sluice-system"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	objects := chartObjects{map[string]*appsv1.Deployment{}, map[string]*policyv1.PodDisruptionBudget{}}
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, doc)
		}
		switch meta.Kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict([]byte(doc), d); err != nil {
				t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, doc)
			}
			objects.deployments[d.Labels["app.kubernetes.io/name"]] = d
		case "PodDisruptionBudget":
			b := &policyv1.PodDisruptionBudget{}
			if err := yaml.UnmarshalStrict([]byte(doc), b); err != nil {
				t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, doc)
			}
			objects.budgets[b.Name] = b
		}
	}
	for name := range chartComponents {
		if objects.deployments[name] == nil {
			t.Fatalf("helm template %s renders no Deployment %s", strings.Join(args, " "), name)
		}
	}
	return objects
}

// placement is the values each component takes for its Pods.
type placement struct {
	NodeSelector              map[string]string                 `json:"nodeSelector"`
	Tolerations               []corev1.Toleration               `json:"tolerations"`
	Affinity                  *corev1.Affinity                  `json:"affinity"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	ImagePullSecrets          []corev1.LocalObjectReference     `json:"imagePullSecrets"`
	PriorityClassName         string                            `json:"priorityClassName"`
	PodAnnotations            map[string]string                 `json:"podAnnotations"`
	PodLabels                 map[string]string                 `json:"podLabels"`
}

// placementValues sets every value of placement, with a large tolerationSeconds (which Helm reads
// from a file as a float), one constraint without a labelSelector and one with, and a label and
// an annotation that the chart sets too.
const placementValues = `nodeSelector: {node.example.com/pool: sluice}
tolerations:
  - {key: dedicated, operator: Equal, value: sluice, effect: NoExecute, tolerationSeconds: 1000000}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {tier: batch}}}
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {team: platform}}}
imagePullSecrets: [{name: regcred}]
priorityClassName: sluice-high
podAnnotations: {example.com/owner: platform, prometheus.io/scrape: "false"}
podLabels: {team: platform, app.kubernetes.io/part-of: other}
`

// writePlacementValues writes a values file giving every component placementValues and returns
// it, with the placement read back as the test expects it.
func writePlacementValues(t *testing.T) (string, placement) {
	t.Helper()
	var want placement
	if err := yaml.UnmarshalStrict([]byte(placementValues), &want); err != nil {
		t.Fatal(err)
	}
	var values strings.Builder
	for _, key := range slices.Sorted(maps.Values(chartComponents)) {
		values.WriteString(key + ":\n  " + strings.ReplaceAll(strings.TrimSpace(placementValues), "\n", "\n  ") + "\n")
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// TestChartPlacesEachComponentsPods renders the chart with every component's nodeSelector,
// tolerations, affinity, topologySpreadConstraints, imagePullSecrets, priorityClassName,
// podAnnotations and podLabels set, and checks that each Deployment's Pod template carries them:
// a spread constraint without a labelSelector counts the component's Pods, and the chart's own
// labels and annotations keep their values.
func TestChartPlacesEachComponentsPods(t *testing.T) {
	skipWithoutHelm(t)
	values, want := writePlacementValues(t)
	objects := renderObjects(t, "-f", values)
	for name, d := range objects.deployments {
		pod := d.Spec.Template
		spread := slices.Clone(want.TopologySpreadConstraints)
		spread[0].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{
			"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "sluice"}}
		got := placement{
			NodeSelector:              pod.Spec.NodeSelector,
			Tolerations:               pod.Spec.Tolerations,
			Affinity:                  pod.Spec.Affinity,
			TopologySpreadConstraints: pod.Spec.TopologySpreadConstraints,
			ImagePullSecrets:          pod.Spec.ImagePullSecrets,
			PriorityClassName:         pod.Spec.PriorityClassName,
		}
		wantSpec := want
		wantSpec.TopologySpreadConstraints = spread
		wantSpec.PodAnnotations, wantSpec.PodLabels = nil, nil
		if diff := cmp.Diff(got, wantSpec); diff != "" {
			t.Errorf("%s's Pod template (-got +want):\n%s", name, diff)
		}
		if got := pod.Annotations["example.com/owner"]; got != "platform" {
			t.Errorf("%s's Pods are annotated example.com/owner=%q; want platform", name, got)
		}
		if got := pod.Annotations["prometheus.io/scrape"]; got != "true" {
			t.Errorf("%s's Pods are annotated prometheus.io/scrape=%q; want the chart's true", name, got)
		}
		if got := pod.Labels["team"]; got != "platform" {
			t.Errorf("%s's Pods are labelled team=%q; want platform", name, got)
		}
		if got := pod.Labels["app.kubernetes.io/part-of"]; got != "sluice" {
			t.Errorf("%s's Pods are labelled app.kubernetes.io/part-of=%q; want the chart's sluice", name, got)
		}
		checkSelects(t, d)
	}
}

// TestChartPlacesNothingByDefault checks that the default values set none of the Pods' optional
// fields, but for the adapters' spread over nodes, and add no label or annotation of their own.
func TestChartPlacesNothingByDefault(t *testing.T) {
	skipWithoutHelm(t)
	chartLabels := []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/name",
		"app.kubernetes.io/part-of", "app.kubernetes.io/version", "helm.sh/chart"}
	for name, d := range renderObjects(t).deployments {
		pod := d.Spec.Template
		var wantSpread []corev1.TopologySpreadConstraint
		if name == "sluice-metrics-adapter" {
			wantSpread = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels},
			}}
		}
		got := placement{
			NodeSelector:              pod.Spec.NodeSelector,
			Tolerations:               pod.Spec.Tolerations,
			Affinity:                  pod.Spec.Affinity,
			TopologySpreadConstraints: pod.Spec.TopologySpreadConstraints,
			ImagePullSecrets:          pod.Spec.ImagePullSecrets,
			PriorityClassName:         pod.Spec.PriorityClassName,
		}
		if diff := cmp.Diff(got, placement{TopologySpreadConstraints: wantSpread}); diff != "" {
			t.Errorf("%s's Pod template with the defaults (-got +want):\n%s", name, diff)
		}
		if got := slices.Sorted(maps.Keys(pod.Labels)); !slices.Equal(got, chartLabels) {
			t.Errorf("%s's Pods are labelled %v; want the chart's %v", name, got, chartLabels)
		}
		for key := range pod.Annotations {
			if !strings.HasPrefix(key, "prometheus.io/") && !strings.HasPrefix(key, "sluice.dev/") {
				t.Errorf("%s's Pods are annotated %s; want the chart's annotations only", name, key)
			}
		}
	}
}

// TestChartKeepsPodsInTheirSelector checks that podLabels cannot take a component's Pods out of
// its Deployment's selector: the schema refuses the selector's labels, and with the schema
// skipped the chart's labels win.
func TestChartKeepsPodsInTheirSelector(t *testing.T) {
	skipWithoutHelm(t)
	for name, key := range chartComponents {
		for _, label := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance"} {
			set := fmt.Sprintf("%s.podLabels.%s=other", key, strings.ReplaceAll(label, ".", `\.`))
			if out, err := helm(t, "template", "sluice", "charts/sluice", "--set", set); err == nil || !strings.Contains(out, "schema") {
				t.Errorf("helm template --set %s: %v, %.200s; want the schema to refuse it", set, err, out)
			}
			d := renderObjects(t, "--skip-schema-validation", "--set", set).deployments[name]
			checkSelects(t, d)
		}
	}
}

// checkSelects checks that a Deployment's selector selects its Pods.
func checkSelects(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatalf("%s's selector: %v", d.Name, err)
	}
	if !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s's selector %s does not select its Pods, labelled %v", d.Name, selector, d.Spec.Template.Labels)
	}
}

// TestChartRunsStandbyManagers checks manager.replicas: the managers elect a leader, and more
// than one get a PodDisruptionBudget that lets a drain take one at a time.
func TestChartRunsStandbyManagers(t *testing.T) {
	skipWithoutHelm(t)
	for _, tc := range []struct {
		set      []string
		replicas int32
		budget   bool
	}{
		{nil, 1, false},
		{[]string{"--set", "manager.replicas=2"}, 2, true},
		{[]string{"--set", "manager.replicas=3"}, 3, true},
	} {
		objects := renderObjects(t, tc.set...)
		d := objects.deployments["sluice-manager"]
		if got := *d.Spec.Replicas; got != tc.replicas {
			t.Errorf("%v: the manager's replicas are %d; want %d", tc.set, got, tc.replicas)
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--leader-elect") {
			t.Errorf("%v: the manager runs with %v; want --leader-elect", tc.set, args)
		}
		budget, ok := objects.budgets["sluice-manager"]
		if ok != tc.budget {
			t.Errorf("%v: a PodDisruptionBudget for the manager: %t; want %t", tc.set, ok, tc.budget)
		}
		if !ok {
			continue
		}
		if got := budget.Spec.MaxUnavailable; got == nil || got.IntValue() != 1 {
			t.Errorf("%v: the manager's budget lets %v go at once; want 1", tc.set, got)
		}
		if diff := cmp.Diff(budget.Spec.Selector, d.Spec.Selector); diff != "" {
			t.Errorf("%v: the manager's budget selects (-got +want):\n%s", tc.set, diff)
		}
	}
}
