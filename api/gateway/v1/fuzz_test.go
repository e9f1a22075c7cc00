package v1_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// exampleConfigs are the repository's example configuration files: the fuzzer's seeds, in YAML
// and in JSON.
var exampleConfigs = []string{
	filepath.Join("testdata", "two-tenants.yaml"),
	filepath.Join("..", "..", "..", "config", "manager", "base-config.yaml"),
}

// fuzzSeeds are small files, good and bad, that reach the parts the examples leave out.
var fuzzSeeds = []string{
	minimal + "server: {maxBodyBytes: 1024, readHeaderTimeout: 5s, readTimeout: 1m, idleTimeout: 2m, maxHeaderBytes: 8192, maxConnections: 100, maxInFlight: 50}\n",
	minimal + "server: {readTimeout: soon}\n",
	minimal + "server: {maxConnections: 99999999999}\n",
	minimal + "jobs: {reclaimAfter: 1s, workers: 2}\n",
	minimal + "providers: [{name: p, baseURL: 'http://h', models: [{name: m}], timeout: 5, prices: {inputPerMillion: 3.00}}]\n",
	minimal + "tenants: [{name: t, keys: [{sha256: x, user: u}], providers: [p], maxWait: -1s, budget: {amount: '5', period: day}}]\n",
	"- a\n- b\n",
	"5\n",
	"null\n",
	`{"apiVersion": "gateway.sluice.dev/v1", "kind": "GatewayConfig", "global": [{"dimension": "tokens", "amount": 5, "per": "minute"}]}`,
}

// FuzzParse feeds the configuration loader any file: it never panics, a file it accepts reads
// back the same after writing it out, and a file it refuses is refused with errors that each
// name the field at fault, unless the file is not YAML or JSON at all.
func FuzzParse(f *testing.F) {
	for _, path := range exampleConfigs {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(j)
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := gatewayv1.Parse(data)
		if err != nil {
			checkNamesFields(t, err)
			return
		}
		checkRoundTrip(t, c)
	})
}

// notAConfig are what the errors of a file that is not a configuration at all say: there is
// no field to name.
var notAConfig = []string{"gatewayv1: config is empty", "gatewayv1: config must be a mapping", "gatewayv1: parse config as YAML: "}

// checkNamesFields fails unless each error err holds names the field at fault, or err says
// the file is empty, not YAML, or not a mapping.
func checkNamesFields(t *testing.T, err error) {
	t.Helper()
	for _, prefix := range notAConfig {
		if strings.HasPrefix(err.Error(), prefix) {
			return
		}
	}
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = agg.Errors()
	}
	for _, e := range errs {
		var fe *field.Error
		var strict kjson.FieldError
		switch {
		case errors.As(e, &fe) && fe.Field != "":
		case errors.As(e, &strict) && strict.FieldPath() != "":
		default:
			t.Errorf("Parse error %q names no field", e)
		}
	}
}

// checkRoundTrip fails unless c, written out and parsed again, is the same configuration.
func checkRoundTrip(t *testing.T, c *gatewayv1.Config) {
	t.Helper()
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatalf("marshal an accepted config: %v", err)
	}
	again, err := gatewayv1.Parse(data)
	if err != nil {
		t.Fatalf("Parse of an accepted config written out: %v\n%s", err, data)
	}
	if diff := cmp.Diff(c, again, cmpopts.EquateEmpty()); diff != "" { // an empty list is written as none
		t.Errorf("an accepted config written out and parsed again differs (-first +again):\n%s", diff)
	}
}
