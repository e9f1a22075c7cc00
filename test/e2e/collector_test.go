package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluicehq/sluice/test/cluster"
)

// otelEnv is a container's OTEL_* environment variables, by name.
func otelEnv(ct corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range ct.Env {
		if strings.HasPrefix(e.Name, "OTEL_") {
			env[e.Name] = e.Value
		}
	}
	return env
}

// TestChartPointsGatewaysAtACollector checks gateway.tracing: by default the gateways have no
// OTEL_* variable, and so trace nothing; with an endpoint they have the SDK's variables for it,
// its protocol and its sampler, a sampled share given as a number in a values file or as a
// string by --set alike; and the schema refuses an endpoint without its scheme, a protocol or a
// sampler the gateway does not take, and a share past 1.
func TestChartPointsGatewaysAtACollector(t *testing.T) {
	skipWithoutHelm(t)
	gateway := func(args ...string) map[string]string {
		return otelEnv(renderObjects(t, args...).deployments["sluice-gateway"].Spec.Template.Spec.Containers[0])
	}
	if env := gateway(); len(env) != 0 {
		t.Errorf("with the defaults, the gateways have %v; want no OTEL_* variable", env)
	}
	want := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.25",
	}
	got := gateway("--set", "gateway.tracing.endpoint=http://otel-collector.observability:4317",
		"--set", "gateway.tracing.protocol=grpc", "--set", "gateway.tracing.samplerArg=0.25")
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("the gateways' OTEL_* variables (-got +want):\n%s", diff)
	}
	values := writeManifest(t, "gateway: {tracing: {endpoint: 'http://otel-collector.observability:4317', protocol: grpc, samplerArg: 0.25}}\n")
	if diff := cmp.Diff(gateway("-f", values), want); diff != "" {
		t.Errorf("the gateways' OTEL_* variables from a values file (-got +want):\n%s", diff)
	}
	for _, set := range []string{
		"gateway.tracing.endpoint=otel-collector:4318",
		"gateway.tracing.protocol=http/json",
		"gateway.tracing.sampler=jaeger_remote",
		"gateway.tracing.samplerArg=1.5",
		"gateway.tracing.samplerArg=2",
		"gateway.tracing.headers=x",
	} {
		if out, err := helm(t, "template", "sluice", "charts/sluice", "--set", set); err == nil || !strings.Contains(out, "schema") {
			t.Errorf("helm template --set %s: %v, %.200s; want the schema to refuse it", set, err, out)
		}
	}
}

// checkTracingComponent applies config/default with the otlp-tracing component and checks that
// the gateways' Deployment the API server holds has the SDK's variables the component names,
// beside the variable the gateways had.
func checkTracingComponent(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	c.Kubectl(t, "apply", "--server-side", "-k", overlay(t, []string{"otlp-tracing"}, "", map[string]string{}))
	d, err := c.Clientset.AppsV1().Deployments("sluice-system").Get(context.Background(), "sluice-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct := d.Spec.Template.Spec.Containers[0]
	want := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.01",
	}
	if diff := cmp.Diff(otelEnv(ct), want); diff != "" {
		t.Errorf("with otlp-tracing, the gateways' OTEL_* variables (-got +want):\n%s", diff)
	}
	if len(ct.Env) != len(want)+1 || ct.Env[0].Name != "POD_NAME" {
		t.Errorf("with otlp-tracing, the gateways' variables are %v; want POD_NAME and the component's", ct.Env)
	}
}
