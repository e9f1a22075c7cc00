package v1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// defaultRetry is a provider's retry policy when the file sets none.
var defaultRetry = gatewayv1.Retry{MaxAttempts: 3, BaseDelay: duration(500 * time.Millisecond), MaxDelay: duration(30 * time.Second)}

// defaultServer is the server section when the file sets none.
var defaultServer = gatewayv1.Server{
	MaxBodyBytes: 20 << 20, ReadHeaderTimeout: duration(10 * time.Second), ReadTimeout: duration(time.Minute),
	IdleTimeout: duration(2 * time.Minute), WriteTimeout: duration(15 * time.Second), StreamKeepalive: duration(15 * time.Second), MaxHeaderBytes: 64 << 10, MaxConnections: 4096, MaxInFlight: 2048,
}

func withMaxBodyBytes(s gatewayv1.Server, n int64) gatewayv1.Server {
	s.MaxBodyBytes = n
	return s
}

func withConnections(s gatewayv1.Server, connections, inFlight int32) gatewayv1.Server {
	s.MaxConnections, s.MaxInFlight = connections, inFlight
	return s
}

var defaultKept = gatewayv1.Kept{OwnersFor: duration(720 * time.Hour), FollowFor: duration(24 * time.Hour), ReclaimAfter: duration(30 * time.Second)}

var defaultJobs = gatewayv1.Jobs{MaxAttempts: 3, ReclaimAfter: duration(time.Minute), ResultTTL: duration(24 * time.Hour), Workers: 8, MaxQueuedPerTenant: 10000,
	MaxBodyBytes: 1 << 20, MaxResultBytes: 8 << 20, MaxBytesPerTenant: 256 << 20}

var defaultBatches = gatewayv1.Batches{MaxFileBytes: 100 << 20, MaxFilesPerTenant: 500, MaxBytesPerTenant: 1 << 30, MaxLinesPerBatch: 10000,
	KeepFor: duration(720 * time.Hour), ValleyPercent: 25}

func TestLoadTwoTenants(t *testing.T) {
	got, err := gatewayv1.Load(filepath.Join("testdata", "two-tenants.yaml"))
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	want := &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion,
		Kind:       gatewayv1.Kind,
		Server:     defaultServer,
		Store:      gatewayv1.Store{Type: gatewayv1.StoreMemory},
		Jobs:       defaultJobs, Kept: defaultKept, Batches: defaultBatches,
		Providers: []gatewayv1.Provider{{
			Name:              "openai",
			BaseURL:           "http://127.0.0.1:8081/v1",
			APIKeyFile:        filepath.Join("testdata", "openai.key"),
			Models:            []gatewayv1.Model{{Name: "gpt-4o-mini", Encoding: "o200k_base", DefaultMaxTokens: 256, MaxTokensParam: "max_completion_tokens", ContextWindow: 1 << 20}},
			API:               "openai",
			AdmissionCount:    "Characters",
			Batches:           "Queue",
			RequestsPerMinute: 1500,
			TokensPerMinute:   300000,
			MaxInFlight:       200,
			HeadroomPercent:   95,
			TimeZone:          "UTC",
			OutputTokenWeight: 1,
			Prices: gatewayv1.Prices{InputPerMillion: "3.00", CachedInputPerMillion: "1.50", CacheWritePerMillion: "3.00", AudioInputPerMillion: "3.00",
				OutputPerMillion: "3.00", AudioOutputPerMillion: "3.00", Tiers: []gatewayv1.TierPrices{{Name: "priority",
					InputPerMillion: "6.00", CachedInputPerMillion: "6.00", CacheWritePerMillion: "6.00", AudioInputPerMillion: "6.00",
					OutputPerMillion: "6.00", AudioOutputPerMillion: "6.00"}}},
			Retry:        defaultRetry,
			Timeout:      duration(60 * time.Second),
			StallTimeout: duration(5 * time.Minute),
			CallTimeout:  duration(30 * time.Minute),
			Breaker:      gatewayv1.Breaker{Failures: 5, OpenFor: duration(30 * time.Second)},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name:      "acme",
			Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey("sk-acme-alice"), User: "alice"}},
			Providers: []string{"openai"},
			Priority:  gatewayv1.PriorityInteractive,
			Weight:    2,
			PerUser: []gatewayv1.Limit{{
				Dimension: gatewayv1.DimensionRequests, Amount: 1000, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject,
			}},
			PerTenant: []gatewayv1.Limit{{
				Dimension: gatewayv1.DimensionTokens, Amount: 200000, Per: gatewayv1.PeriodMinute, Burst: 200000, OnLimit: gatewayv1.BehaviorQueue,
			}},
			Endpoints: []gatewayv1.EndpointLimits{{
				Endpoint: gatewayv1.EndpointChat,
				Limits: []gatewayv1.Limit{{
					Dimension: gatewayv1.DimensionRequests, Amount: 60, Per: gatewayv1.PeriodMinute, Burst: 60, OnLimit: gatewayv1.BehaviorQueue,
				}},
			}},
			Budget:   &gatewayv1.Budget{Amount: "5000", Period: gatewayv1.PeriodMonth},
			TimeZone: "UTC",
			MaxWait:  duration(60 * time.Second),
			JobScope: gatewayv1.JobScopeTenant, ProviderState: gatewayv1.ProviderStateKeep,
		}, {
			Name:      "globex",
			Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey("sk-globex-bob"), User: "bob"}},
			Providers: []string{"openai"},
			Priority:  gatewayv1.PriorityBatch,
			Weight:    1,
			TimeZone:  "UTC",
			MaxWait:   duration(60 * time.Second),
			JobScope:  gatewayv1.JobScopeTenant, ProviderState: gatewayv1.ProviderStateKeep,
		}},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Load() mismatch (-got +want):\n%s", diff)
	}
}

func TestLoadResolvesSecretFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	abs := filepath.Join(t.TempDir(), "other.key")
	config := minimal + `
store:
  type: redis
  redis:
    sentinel: {masterName: sluice, addresses: ["127.0.0.1:26379"], passwordFile: secrets/sentinel-password}
    passwordFile: secrets/redis-password
    tls: {caFile: secrets/redis-ca.pem}
providers:
  - name: relative
    baseURL: https://relative.example/v1
    apiKeyFile: relative.key
    models: [{name: a}]
  - name: absolute
    baseURL: https://absolute.example/v1
    apiKeyFile: ` + abs + `
    models: [{name: b}]
  - name: keyless
    baseURL: http://127.0.0.1:8000/v1
    models: [{name: c}]
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := gatewayv1.Load(path)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	got := []string{c.Store.Redis.PasswordFile, c.Store.Redis.Sentinel.PasswordFile, c.Store.Redis.TLS.CAFile}
	for _, p := range c.Providers {
		got = append(got, p.APIKeyFile)
	}
	want := []string{filepath.Join(dir, "secrets", "redis-password"), filepath.Join(dir, "secrets", "sentinel-password"), filepath.Join(dir, "secrets", "redis-ca.pem"),
		filepath.Join(dir, "relative.key"), abs, ""}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("secret file paths mismatch (-got +want):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(minimal+"server: {maxBodyBytes: -1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want []string
	}{
		{name: "missing file", path: filepath.Join(dir, "absent.yaml"), want: []string{"gatewayv1: read config", "absent.yaml"}},
		{name: "invalid file", path: bad, want: []string{"gatewayv1: " + bad, "server.maxBodyBytes: Invalid value: -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gatewayv1.Load(tc.path)
			checkError(t, err, tc.want, nil)
		})
	}
}

// minimal is the smallest valid configuration: it serves nobody.
const minimal = `apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
`

func TestParseDefaults(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  *gatewayv1.Config
	}{{
		name:  "empty config",
		input: minimal,
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: defaultServer,
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs:   defaultJobs, Kept: defaultKept, Batches: defaultBatches,
		},
	}, {
		name:  "JSON",
		input: `{"apiVersion": "gateway.sluice.dev/v1", "kind": "GatewayConfig", "server": {"maxBodyBytes": 1024}}`,
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: withMaxBodyBytes(defaultServer, 1024),
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs:   defaultJobs, Kept: defaultKept, Batches: defaultBatches,
		},
	}, {
		name:  "maxInFlight follows maxConnections",
		input: minimal + "server: {maxConnections: 100}\n",
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: withConnections(defaultServer, 100, 50),
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs:   defaultJobs, Kept: defaultKept, Batches: defaultBatches,
		},
	}, {
		name:  "redis",
		input: minimal + "store: {type: redis, redis: {address: 'redis:6379'}}\n",
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: defaultServer,
			Store: gatewayv1.Store{Type: gatewayv1.StoreRedis, Redis: &gatewayv1.RedisStore{
				Address: "redis:6379", FailMode: gatewayv1.FailClosed, Replicas: 1,
			}},
			Jobs: defaultJobs, Kept: defaultKept, Batches: defaultBatches,
		},
	}, {
		name:  "jobs",
		input: minimal + "jobs: {maxAttempts: 5, reclaimAfter: 2s}\n",
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: defaultServer,
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs: gatewayv1.Jobs{MaxAttempts: 5, ReclaimAfter: duration(2 * time.Second), ResultTTL: duration(24 * time.Hour), Workers: 8, MaxQueuedPerTenant: 10000,
				MaxBodyBytes: 1 << 20, MaxResultBytes: 8 << 20, MaxBytesPerTenant: 256 << 20},
			Kept: defaultKept, Batches: defaultBatches,
		},
	}, {
		name: "limits",
		input: minimal + `global:
  - {dimension: requests, amount: 100, per: second}
  - {dimension: requests, amount: 100, per: second, burst: 5, onLimit: Reject}
  - {dimension: dollars, dollars: "0.50", per: minute}
  - {dimension: tokens, amount: 1000000, per: day}
  - {dimension: dollars, dollars: "100", per: month}
`,
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: defaultServer,
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs:   defaultJobs, Kept: defaultKept, Batches: defaultBatches,
			Global: []gatewayv1.Limit{
				{Dimension: gatewayv1.DimensionRequests, Amount: 100, Per: gatewayv1.PeriodSecond, Burst: 100, OnLimit: gatewayv1.BehaviorQueue},
				{Dimension: gatewayv1.DimensionRequests, Amount: 100, Per: gatewayv1.PeriodSecond, Burst: 5, OnLimit: gatewayv1.BehaviorReject},
				{Dimension: gatewayv1.DimensionDollars, Dollars: "0.50", Per: gatewayv1.PeriodMinute, OnLimit: gatewayv1.BehaviorQueue},
				{Dimension: gatewayv1.DimensionTokens, Amount: 1000000, Per: gatewayv1.PeriodDay, OnLimit: gatewayv1.BehaviorReject},
				{Dimension: gatewayv1.DimensionDollars, Dollars: "100", Per: gatewayv1.PeriodMonth, OnLimit: gatewayv1.BehaviorReject},
			},
		},
	}, {
		name: "provider and tenant",
		input: minimal + `providers:
  - name: local
    baseURL: http://127.0.0.1:8000/v1
    models: [{name: llama}]
tenants:
  - name: t
    keys: [{sha256: ` + gatewayv1.HashKey("k") + `, user: u}]
    providers: [local]
`,
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: defaultServer,
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs:   defaultJobs, Kept: defaultKept, Batches: defaultBatches,
			Providers: []gatewayv1.Provider{{
				Name: "local", BaseURL: "http://127.0.0.1:8000/v1",
				Models:          []gatewayv1.Model{{Name: "llama", DefaultMaxTokens: 256, MaxTokensParam: "max_completion_tokens", ContextWindow: 1 << 20}},
				API:             "openai",
				AdmissionCount:  "Characters",
				Batches:         "Queue",
				HeadroomPercent: 100,
				TimeZone:        "UTC", OutputTokenWeight: 1,
				Retry:        defaultRetry,
				Timeout:      duration(60 * time.Second),
				StallTimeout: duration(5 * time.Minute),
				CallTimeout:  duration(30 * time.Minute),
				Breaker:      gatewayv1.Breaker{Failures: 5, OpenFor: duration(30 * time.Second)},
			}},
			Tenants: []gatewayv1.Tenant{{
				Name:      "t",
				Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey("k"), User: "u"}},
				Providers: []string{"local"},
				Priority:  gatewayv1.PriorityInteractive,
				Weight:    1,
				TimeZone:  "UTC",
				MaxWait:   duration(60 * time.Second),
				JobScope:  gatewayv1.JobScopeTenant, ProviderState: gatewayv1.ProviderStateKeep,
			}},
		},
	}, {
		name: "calls in flight",
		input: minimal + `providers:
  - name: local
    baseURL: http://127.0.0.1:8000/v1
    models: [{name: llama}]
tenants:
  - name: t
    keys: [{sha256: ` + gatewayv1.HashKey("k") + `, user: u}]
    providers: [local]
    perUser: [{dimension: inFlight, amount: 2}]
    perTenant: [{dimension: inFlight, amount: 5, onLimit: Reject}]
`,
		want: &gatewayv1.Config{
			APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.Kind,
			Server: defaultServer,
			Store:  gatewayv1.Store{Type: gatewayv1.StoreMemory},
			Jobs:   defaultJobs, Kept: defaultKept, Batches: defaultBatches,
			Providers: []gatewayv1.Provider{{
				Name: "local", BaseURL: "http://127.0.0.1:8000/v1",
				Models:          []gatewayv1.Model{{Name: "llama", DefaultMaxTokens: 256, MaxTokensParam: "max_completion_tokens", ContextWindow: 1 << 20}},
				API:             "openai",
				AdmissionCount:  "Characters",
				Batches:         "Queue",
				HeadroomPercent: 100,
				TimeZone:        "UTC", OutputTokenWeight: 1,
				Retry:        defaultRetry,
				Timeout:      duration(60 * time.Second),
				StallTimeout: duration(5 * time.Minute),
				CallTimeout:  duration(30 * time.Minute),
				Breaker:      gatewayv1.Breaker{Failures: 5, OpenFor: duration(30 * time.Second)},
			}},
			Tenants: []gatewayv1.Tenant{{
				Name:      "t",
				Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey("k"), User: "u"}},
				Providers: []string{"local"},
				Priority:  gatewayv1.PriorityInteractive,
				Weight:    1,
				// No burst and no period: calls at once, queued unless the limit says Reject.
				PerUser:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionInFlight, Amount: 2, OnLimit: gatewayv1.BehaviorQueue}},
				PerTenant: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionInFlight, Amount: 5, OnLimit: gatewayv1.BehaviorReject}},
				TimeZone:  "UTC",
				MaxWait:   duration(60 * time.Second),
				JobScope:  gatewayv1.JobScopeTenant, ProviderState: gatewayv1.ProviderStateKeep,
			}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gatewayv1.Parse([]byte(tc.input))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Parse() mismatch (-got +want):\n%s", diff)
			}
			got.Default()
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Default() again changed the config (-got +want):\n%s", diff)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    []string
		notWant []string
	}{
		{name: "empty", input: "", want: []string{"gatewayv1: config is empty"}},
		{name: "malformed YAML", input: "providers: [", want: []string{"gatewayv1: parse config", "yaml: line 1"}},
		{name: "not a mapping", input: "- a\n- b\n", want: []string{"gatewayv1: config must be a mapping"}},
		{name: "a number", input: "5\n", want: []string{"gatewayv1: config must be a mapping"}},
		{
			name:  "wrong apiVersion",
			input: "apiVersion: gateway.sluice.dev/v2\nkind: GatewayConfig\nnewField: 1\n",
			want:  []string{`apiVersion: Unsupported value: "gateway.sluice.dev/v2"`, `supported values: "gateway.sluice.dev/v1"`},
			// A file of another version gets one error, not one per field this version lacks.
			notWant: []string{"newField"},
		},
		{name: "missing apiVersion", input: "kind: GatewayConfig\n", want: []string{`apiVersion: Required value: must be one of ["gateway.sluice.dev/v1"]`}},
		{name: "wrong kind", input: "apiVersion: gateway.sluice.dev/v1\nkind: ProviderQuota\n", want: []string{`kind: Unsupported value: "ProviderQuota"`}},
		{name: "unknown top-level key", input: minimal + "tenant: []\n", want: []string{`unknown field "tenant"`}},
		{
			name:  "unknown nested key",
			input: minimal + "providers: [{name: p, baseURL: 'http://h', models: [{name: m}], requestsPerMin: 5}]\n",
			want:  []string{`unknown field "providers[0].requestsPerMin"`},
		},
		{name: "key in the wrong case", input: minimal + "Server: {}\n", want: []string{`unknown field "Server"`}},
		{name: "repeated key", input: minimal + "server: {}\nserver: {}\n", want: []string{`key "server" already set`}},
		{
			name:  "unquoted money",
			input: minimal + "providers: [{name: p, baseURL: 'http://h', models: [{name: m}], prices: {inputPerMillion: 3.00}}]\n",
			want:  []string{"providers[0].prices.inputPerMillion", `quoted strings, such as "3.00"`},
		},
		{
			name:  "unquoted money in a model's tier",
			input: minimal + "providers: [{name: p, baseURL: 'http://h', models: [{name: m, prices: {tiers: [{name: flex, cachedInputPerMillion: 0.5}]}}]}]\n",
			want:  []string{"providers[0].models[0].prices.tiers[0].cachedInputPerMillion", `quoted strings, such as "3.00"`},
		},
		{
			name:  "wrong type",
			input: minimal + "providers: [{name: p, baseURL: 'http://h', models: [{name: m}], requestsPerMinute: fast}]\n",
			want:  []string{"providers[0].requestsPerMinute: Invalid value: must be a whole number"},
		},
		{
			name:  "not a duration",
			input: minimal + "server: {readTimeout: soon}\n",
			want:  []string{`server.readTimeout: Invalid value: must be a duration such as "30s"`},
		},
		{
			name:  "a duration as a number",
			input: minimal + "providers: [{name: p, baseURL: 'http://h', models: [{name: m}]}, {name: q, baseURL: 'http://h', models: [{name: m2}], timeout: 5}]\n",
			want:  []string{`providers[1].timeout: Invalid value: must be a duration`},
		},
		{
			name:  "too large",
			input: minimal + "server: {maxConnections: 99999999999}\n",
			want:  []string{"server.maxConnections: Invalid value: must be a whole number from -2147483648 to 2147483647"},
		},
		{
			name:  "a list for a mapping",
			input: minimal + "tenants: [{name: t, keys: [{sha256: x, user: u}], providers: [p], budget: [5]}]\n",
			want:  []string{"tenants[0].budget: Invalid value: must be a mapping"},
		},
		{name: "invalid value", input: minimal + "server: {maxBodyBytes: -1}\n", want: []string{"gatewayv1: invalid config", "server.maxBodyBytes: Invalid value: -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gatewayv1.Parse([]byte(tc.input))
			checkError(t, err, tc.want, tc.notWant)
		})
	}
}

// checkError fails unless err holds every string of want and none of
// notWant.
func checkError(t *testing.T, err error, want, notWant []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want one containing %q", want)
	}
	got := err.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("error = %q, want it to contain %q", got, w)
		}
	}
	for _, nw := range notWant {
		if strings.Contains(got, nw) {
			t.Errorf("error = %q, want it not to contain %q", got, nw)
		}
	}
}
