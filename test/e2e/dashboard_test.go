package e2e

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Query any `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestGrafanaDashboardQueriesExportedMetrics checks that config/grafana/sluice.json is JSON, that
// each panel's query parses (Grafana's variables put in), that every Sluice metric it queries is
// one the gateway or the metrics adapter exports, as their sources declare them, and that it
// shows what an operator looks for first: the calls' outcomes, refusals by the limits and at the
// door, the queue and its wait, spend, throttles, each provider's use of each of its limits, the
// providers' time under the GenAI conventions, and the adapter's freshness.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(repoRoot + "/config/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("config/grafana/sluice.json: %v", err)
	}
	exported := exportedMetrics(t, repoRoot+"/cmd/gateway", repoRoot+"/metrics")
	queries := dashboardQueries(d)
	if len(d.Panels) == 0 || len(queries) < len(d.Panels) {
		t.Fatalf("%d panels, %d queries; want a query in each panel", len(d.Panels), len(queries))
	}
	used := map[string]bool{}
	for _, q := range queries {
		if _, err := metricsql.Parse(grafanaVariables.Replace(q)); err != nil && !strings.HasPrefix(q, "label_values(") {
			t.Errorf("the dashboard's query %s does not parse: %v", q, err)
		}
		for _, name := range regexp.MustCompile(`\b(sluice|gen_ai_client)_[a-z_:]+`).FindAllString(q, -1) {
			used[name] = true
			if !exported[name] {
				t.Errorf("the dashboard queries %s, which Sluice does not export: %s", name, q)
			}
		}
	}
	for _, want := range []string{"sluice_gateway_requests_total", "sluice_gateway_refusals_total", "sluice_gateway_queue_depth",
		"sluice_gateway_queue_wait_seconds_bucket", "sluice_gateway_door_refusals_total", "sluice_gateway_spend_microdollars_total",
		"sluice_gateway_upstream_attempts_total", "sluice_gateway_provider_limit", "sluice_gateway_provider_limit_used",
		"sluice_adapter_newest_value_age_seconds", "gen_ai_client_operation_duration_seconds_bucket"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// grafanaVariables puts a value in place of each variable the dashboard's queries use.
var grafanaVariables = strings.NewReplacer("$namespace", ".*", "$__rate_interval", "1m")

// dashboardQueries returns the panels' and the variables' queries.
func dashboardQueries(d dashboard) []string {
	var queries []string
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			queries = append(queries, target.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			queries = append(queries, q)
		}
	}
	return queries
}

// exportedMetrics reads the metric names declared in the Go sources under dirs: the Namespace,
// Subsystem and Name of each *Opts literal, and NewDesc's first argument. A histogram's series
// add _bucket, _sum and _count.
func exportedMetrics(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
			if err != nil || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				addMetricNames(names, n)
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d metric names in %v", len(names), dirs)
	}
	return names
}

func addMetricNames(names map[string]bool, n ast.Node) {
	switch n := n.(type) {
	case *ast.CompositeLit:
		opts := exprName(n.Type)
		if !strings.HasSuffix(opts, "Opts") {
			return
		}
		fields := map[string]string{}
		for _, elt := range n.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				fields[exprName(kv.Key)] = stringLit(kv.Value)
			}
		}
		if fields["Name"] == "" {
			return
		}
		var parts []string
		for _, part := range []string{fields["Namespace"], fields["Subsystem"], fields["Name"]} {
			if part != "" {
				parts = append(parts, part)
			}
		}
		name := strings.Join(parts, "_")
		names[name] = true
		if strings.HasSuffix(opts, "HistogramOpts") {
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		}
	case *ast.CallExpr:
		if exprName(n.Fun) == "NewDesc" && len(n.Args) > 0 {
			if name := stringLit(n.Args[0]); name != "" {
				names[name] = true
			}
		}
	}
}

// exprName is the last identifier of an expression such as prometheus.CounterOpts or &x.Y.
func exprName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.StarExpr:
		return exprName(e.X)
	}
	return ""
}

func stringLit(e ast.Expr) string {
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		if s, err := strconv.Unquote(lit.Value); err == nil {
			return s
		}
	}
	return ""
}
