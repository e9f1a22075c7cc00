package v1_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// withPlans is a configuration with one provider and the plan "pro", whose
// tenants are in the files it names after "tenantFiles:".
const withPlans = minimal + `providers:
  - {name: openai, baseURL: "http://127.0.0.1:8081/v1", models: [{name: gpt-4o-mini}]}
plans:
  - name: pro
    providers: [openai]
    perUser: [{dimension: requests, amount: 60, per: minute}]
    budget: {amount: "100", period: month}
`

const (
	hashA = "860edb4dfaa237cb0c5019e8a1137fecbeaf4a7ef0dd63819e62a6de82eae7fb"
	hashB = "63e1790f43b4f1dd102005be214e00a8d6729f6ad768c099e52d810ff6c1d299"
)

// tenantFile is a tenant file holding tenant acme on plan, with the key
// of hash.
func tenantFile(plan, hash string) string {
	return `apiVersion: gateway.sluice.dev/v1
kind: TenantList
tenants:
  - {name: acme, plan: ` + plan + `, keys: [{sha256: ` + hash + `, user: alice}]}
`
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// writeFiles writes files into a new directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadTenantFiles(t *testing.T) {
	shard := tenantFile("pro", hashA)
	dir := writeFiles(t, map[string]string{
		"config.yaml": withPlans + `tenants:
  - {name: globex, keys: [{sha256: ` + hashB + `, user: bob}], providers: [openai]}
tenantFiles:
  - {path: tenants-0.yaml, sha256: ` + sha(shard) + `}
`,
		"tenants-0.yaml": shard,
	})
	cfg, err := gatewayv1.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := []string{cfg.Tenants[0].Name, cfg.Tenants[1].Name}; !cmp.Equal(got, []string{"globex", "acme"}) {
		t.Fatalf("tenants = %q; want the file's own, then the tenant file's", got)
	}
	acme, pro := cfg.Tenants[1], cfg.Plans[0]
	if acme.Plan != "" {
		t.Errorf("acme.plan = %q; want it cleared once the plan's terms are in", acme.Plan)
	}
	if diff := cmp.Diff(pro.PerUser, acme.PerUser); diff != "" {
		t.Errorf("acme.perUser differs from its plan's (-plan +acme):\n%s", diff)
	}
	if acme.Budget == nil || acme.TimeZone != "UTC" || acme.Weight != 1 || acme.Keys[0].SHA256 != hashA {
		t.Errorf("acme = %+v; want the plan's budget and defaults, and its own key", acme)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a loaded configuration does not validate again: %v", err)
	}
}

func TestLoadTenantFileErrors(t *testing.T) {
	good := tenantFile("pro", hashA)
	oneFile := withPlans + "tenantFiles: [{path: tenants-0.yaml}]\n"
	tests := []struct {
		name      string
		files     map[string]string // by name; config.yaml is loaded
		want      []string
		notWanted []string
	}{{
		name:  "missing file",
		files: map[string]string{"config.yaml": oneFile},
		want:  []string{"tenantFiles[0]: read tenant file", "tenants-0.yaml", "no such file"},
	}, {
		name: "a file that does not match its hash",
		files: map[string]string{
			"config.yaml":    withPlans + "tenantFiles: [{path: tenants-0.yaml, sha256: " + sha(good) + "}]\n",
			"tenants-0.yaml": tenantFile("pro", hashB),
		},
		want: []string{"tenantFiles[0]", "tenants-0.yaml does not match the sha256"},
	}, {
		name:  "corrupt YAML",
		files: map[string]string{"config.yaml": oneFile, "tenants-0.yaml": good[:len(good)-20]},
		want:  []string{"tenantFiles[0]", "tenants-0.yaml: parse tenant file as YAML"},
	}, {
		name:  "a configuration where a tenant file belongs",
		files: map[string]string{"config.yaml": oneFile, "tenants-0.yaml": minimal},
		want:  []string{"tenants-0.yaml", `kind: Unsupported value: "GatewayConfig"`, `"TenantList"`},
	}, {
		name:  "an unknown field",
		files: map[string]string{"config.yaml": oneFile, "tenants-0.yaml": good + "providers: []\n"},
		want:  []string{"tenants-0.yaml", `unknown field "providers"`},
	}, {
		name:  "an unknown plan",
		files: map[string]string{"config.yaml": oneFile, "tenants-0.yaml": tenantFile("gold", hashA)},
		want:  []string{`tenants[0].plan: Invalid value: "gold": must name one of plans`},
	}, {
		name: "a key in two files",
		files: map[string]string{
			"config.yaml":    withPlans + "tenantFiles: [{path: tenants-0.yaml}, {path: tenants-1.yaml}]\n",
			"tenants-0.yaml": good, "tenants-1.yaml": good,
		},
		want: []string{"tenants[1].name: Duplicate value", "tenants[1].keys[0].sha256: Invalid value", "must be unique, but equals tenants[0].keys[0].sha256"},
		// The hash is never quoted.
		notWanted: []string{hashA},
	}, {
		name: "a tenant with a plan and terms of its own",
		files: map[string]string{"config.yaml": withPlans +
			"tenants: [{name: acme, plan: pro, weight: 2, keys: [{sha256: " + hashA + ", user: alice}]}]\n"},
		want: []string{"tenants[0]: Forbidden: a tenant that names a plan must set no terms of its own"},
	}, {
		name: "a plan with keys",
		files: map[string]string{"config.yaml": withPlans +
			"  - {name: free, providers: [openai], keys: [{sha256: " + hashA + ", user: alice}]}\n"},
		want: []string{"plans[1].keys: Forbidden: a plan has no keys"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gatewayv1.Load(filepath.Join(writeFiles(t, tc.files), "config.yaml"))
			checkError(t, err, tc.want, tc.notWanted)
		})
	}
}

func TestParseLeavesTenantFilesUnread(t *testing.T) {
	cfg, err := gatewayv1.Parse([]byte(withPlans + "tenantFiles: [{path: /nonexistent/tenants-0.yaml}]\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(cfg.Tenants) != 0 || len(cfg.TenantFiles) != 1 {
		t.Errorf("tenants %d, tenantFiles %d; want 0 and 1", len(cfg.Tenants), len(cfg.TenantFiles))
	}
}

// TestLoadTenantFileJSON checks that a tenant file in JSON, as the operator
// writes them, loads, and is decoded as strictly as YAML.
func TestLoadTenantFileJSON(t *testing.T) {
	good := `{"apiVersion": "gateway.sluice.dev/v1", "kind": "TenantList", "tenants": [{"name": "acme", "plan": "pro", "keys": [{"sha256": "` + hashA + `", "user": "alice"}]}]}`
	tests := []struct {
		name  string
		shard string
		want  []string // empty: loads
	}{
		{name: "valid", shard: good},
		{name: "a key given twice", shard: strings.Replace(good, `"plan": "pro"`, `"plan": "pro", "plan": "pro"`, 1),
			want: []string{"tenants-0.json", `duplicate field "tenants[0].plan"`}},
		{name: "an unknown field", shard: strings.Replace(good, `"plan": "pro"`, `"Plan": "pro"`, 1),
			want: []string{"tenants-0.json", `unknown field "tenants[0].Plan"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"config.yaml":    withPlans + "tenantFiles: [{path: tenants-0.json}]\n",
				"tenants-0.json": tc.shard,
			})
			cfg, err := gatewayv1.Load(filepath.Join(dir, "config.yaml"))
			if len(tc.want) > 0 {
				checkError(t, err, tc.want, nil)
				return
			}
			if err != nil || len(cfg.Tenants) != 1 || cfg.Tenants[0].PerUser == nil {
				t.Fatalf("Load = %+v, %v; want acme with the plan's terms", cfg, err)
			}
		})
	}
}
