package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/test/cluster"
)

// alertsFile is the PrometheusRule that the kustomize component ships and the chart copies.
const alertsFile = repoRoot + "/config/components/prometheusrule/prometheusrule.yaml"

// alertRule is one alerting rule of a PrometheusRule.
type alertRule struct {
	Alert, Expr, For string
	Labels           map[string]string
}

// prometheusRule is the part of a PrometheusRule the tests read.
type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Name  string
			Rules []alertRule
		}
	}
}

func (r prometheusRule) alerts() []alertRule {
	var out []alertRule
	for _, g := range r.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

func readAlerts(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rule prometheusRule
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	return rule.alerts()
}

// TestAlertsParse parses each alert's expression with a PromQL parser, and checks that each alert
// waits before it fires, says how bad it is, and is the one config/README.md explains.
func TestAlertsParse(t *testing.T) {
	alerts := readAlerts(t)
	if len(alerts) < 4 {
		t.Fatalf("%s holds %d alerts; want the four config/README.md explains", alertsFile, len(alerts))
	}
	readme, err := os.ReadFile(repoRoot + "/config/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if _, err := metricsql.Parse(a.Expr); err != nil {
			t.Errorf("alert %s: expression %q does not parse: %v", a.Alert, a.Expr, err)
		}
		if a.For == "" || a.Labels["severity"] == "" {
			t.Errorf("alert %s: for %q, severity %q; want both", a.Alert, a.For, a.Labels["severity"])
		}
		if !strings.Contains(string(readme), "`"+a.Expr+"`") {
			t.Errorf("alert %s: config/README.md does not show its expression %s", a.Alert, a.Expr)
		}
	}
	if _, err := metricsql.Parse(`sum by (provider) (rate(sluice_gateway_upstream_attempts_total[5m]) > 0`); err == nil {
		t.Error("the parser takes an expression with an unclosed parenthesis; it checks nothing")
	}
}

// checkAlertsApplied checks that the API server holds the PrometheusRule with every alert of the
// file.
func checkAlertsApplied(t *testing.T, c *cluster.Cluster, namespace, name string) {
	t.Helper()
	var applied prometheusRule
	if err := json.Unmarshal([]byte(c.Kubectl(t, "get", "prometheusrule", name, "-n", namespace, "-o", "json")), &applied); err != nil {
		t.Fatal(err)
	}
	names := func(alerts []alertRule) []string {
		var out []string
		for _, a := range alerts {
			out = append(out, a.Alert)
		}
		return out
	}
	if got, want := names(applied.alerts()), names(readAlerts(t)); !slices.Equal(got, want) {
		t.Errorf("prometheusrule %s/%s holds the alerts %v; want %v", namespace, name, got, want)
	}
}
