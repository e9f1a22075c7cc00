package v1_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// validConfig returns a configuration, not yet defaulted, that every rule
// accepts: a hosted and a self-hosted provider, a tenant with a budget that
// degrades, and a tenant on both providers.
func validConfig() *gatewayv1.Config {
	return &gatewayv1.Config{
		APIVersion: gatewayv1.APIVersion,
		Kind:       gatewayv1.Kind,
		Providers: []gatewayv1.Provider{{
			Name:              "openai",
			BaseURL:           "https://api.openai.example/v1",
			APIKeyFile:        "openai.key",
			Models:            []gatewayv1.Model{{Name: "gpt-4o", Encoding: "o200k_base"}, {Name: "gpt-4o-mini"}},
			RequestsPerMinute: 1500,
			Prices:            gatewayv1.Prices{InputPerMillion: "2.50", OutputPerMillion: "10"},
		}, {
			Name:    "local",
			BaseURL: "http://127.0.0.1:8000/v1",
			Models:  []gatewayv1.Model{{Name: "llama"}},
		}},
		Tenants: []gatewayv1.Tenant{{
			Name:      "acme",
			Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey("sk-acme-alice"), User: "alice"}},
			Providers: []string{"openai"},
			PerUser:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 1000, Per: gatewayv1.PeriodDay}},
			PerTenant: []gatewayv1.Limit{{Dimension: gatewayv1.DimensionTokens, Amount: 200000, Per: gatewayv1.PeriodMinute}},
			Endpoints: []gatewayv1.EndpointLimits{{
				Endpoint: gatewayv1.EndpointChat,
				Limits:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionRequests, Amount: 60, Per: gatewayv1.PeriodMinute}},
			}},
			Budget:   &gatewayv1.Budget{Amount: "5000", Period: gatewayv1.PeriodMonth},
			TimeZone: "Europe/Berlin",
			Degrade:  &gatewayv1.Degrade{Model: "gpt-4o", Fallback: "gpt-4o-mini", BelowPercent: 20},
		}, {
			Name:      "globex",
			Keys:      []gatewayv1.Key{{SHA256: gatewayv1.HashKey("sk-globex-bob"), User: "bob"}},
			Providers: []string{"openai", "local"},
			Priority:  gatewayv1.PriorityBatch,
		}},
	}
}

// redis switches c to a valid Redis store.
func redis(c *gatewayv1.Config) {
	c.Store = gatewayv1.Store{Type: gatewayv1.StoreRedis, Redis: &gatewayv1.RedisStore{Address: "redis:6379"}}
}

// Helpers to reach the parts of validConfig the cases change.
func openai(c *gatewayv1.Config) *gatewayv1.Provider { return &c.Providers[0] }
func acme(c *gatewayv1.Config) *gatewayv1.Tenant     { return &c.Tenants[0] }
func perUser(c *gatewayv1.Config) *gatewayv1.Limit   { return &c.Tenants[0].PerUser[0] }
func perTenant(c *gatewayv1.Config) *gatewayv1.Limit { return &c.Tenants[0].PerTenant[0] }

// inFlight is a limit of n calls at once.
func inFlight(n int64) gatewayv1.Limit {
	return gatewayv1.Limit{Dimension: gatewayv1.DimensionInFlight, Amount: n}
}

func dollarsPerMinute(l *gatewayv1.Limit) {
	*l = gatewayv1.Limit{Dimension: gatewayv1.DimensionDollars, Dollars: "0.50", Per: gatewayv1.PeriodMinute}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *gatewayv1.Config)
		want    []string // substrings of the error; none means valid
		notWant []string // what the error must never show
	}{
		{name: "valid", mutate: func(c *gatewayv1.Config) {}},
		{name: "valid redis", mutate: redis},
		{name: "valid rates of every kind", mutate: func(c *gatewayv1.Config) {
			c.Global = []gatewayv1.Limit{
				{Dimension: gatewayv1.DimensionRequests, Amount: 10, Per: gatewayv1.PeriodSecond, Burst: 5},
				{Dimension: gatewayv1.DimensionTokens, Amount: 10, Per: gatewayv1.PeriodHour, OnLimit: gatewayv1.BehaviorReject},
				{Dimension: gatewayv1.DimensionDollars, Dollars: "1000", Per: gatewayv1.PeriodMonth},
				{Dimension: gatewayv1.DimensionInputTokens, Amount: 1000, Per: gatewayv1.PeriodMinute, Burst: 500},
				{Dimension: gatewayv1.DimensionOutputTokens, Amount: 100_000, Per: gatewayv1.PeriodDay},
			}
			acme(c).PerUser = append(acme(c).PerUser, gatewayv1.Limit{Dimension: gatewayv1.DimensionOutputTokens, Amount: 50, Per: gatewayv1.PeriodSecond})
		}},

		{
			name:   "apiVersion",
			mutate: func(c *gatewayv1.Config) { c.APIVersion = "gateway.sluice.dev/v2" },
			want:   []string{`apiVersion: Unsupported value: "gateway.sluice.dev/v2"`},
		},
		{
			name:   "server.maxBodyBytes",
			mutate: func(c *gatewayv1.Config) { c.Server.MaxBodyBytes = -1 },
			want:   []string{"server.maxBodyBytes: Invalid value: -1"},
		},
		{
			name: "server timeouts",
			mutate: func(c *gatewayv1.Config) {
				c.Server.ReadHeaderTimeout = duration(-time.Second)
				c.Server.ReadTimeout = duration(-time.Second)
				c.Server.IdleTimeout = duration(-time.Second)
				c.Server.WriteTimeout = duration(-time.Second)
			},
			want: []string{`server.readHeaderTimeout: Invalid value: "-1s": must be more than 0s`,
				`server.readTimeout: Invalid value: "-1s": must be more than 0s`, `server.idleTimeout: Invalid value: "-1s"`,
				`server.writeTimeout: Invalid value: "-1s"`},
		},
		{
			name: "server.readTimeout under readHeaderTimeout",
			mutate: func(c *gatewayv1.Config) {
				c.Server.ReadHeaderTimeout, c.Server.ReadTimeout = duration(20*time.Second), duration(10*time.Second)
			},
			want: []string{`server.readTimeout: Invalid value: "10s": must be at least readHeaderTimeout (20s)`},
		},
		{
			name:   "server.maxHeaderBytes",
			mutate: func(c *gatewayv1.Config) { c.Server.MaxHeaderBytes = 100 },
			want:   []string{"server.maxHeaderBytes: Invalid value: 100: must be from 4096 to 16777216"},
		},
		{
			name:   "server.maxConnections",
			mutate: func(c *gatewayv1.Config) { c.Server.MaxConnections, c.Server.MaxInFlight = -1, -2 },
			want:   []string{"server.maxConnections: Invalid value: -1", "server.maxInFlight: Invalid value: -2: must be more than 0"},
		},
		{
			name:   "server.maxInFlight over maxConnections",
			mutate: func(c *gatewayv1.Config) { c.Server.MaxConnections, c.Server.MaxInFlight = 100, 101 },
			want:   []string{"server.maxInFlight: Invalid value: 101: must be at most maxConnections (100)"},
		},

		{
			name:   "store.type",
			mutate: func(c *gatewayv1.Config) { c.Store.Type = "etcd" },
			want:   []string{`store.type: Unsupported value: "etcd"`, `"memory", "redis"`},
		},
		{
			name: "store.redis with memory",
			mutate: func(c *gatewayv1.Config) {
				c.Store = gatewayv1.Store{Type: gatewayv1.StoreMemory, Redis: &gatewayv1.RedisStore{Address: "redis:6379"}}
			},
			want: []string{"store.redis: Forbidden", `type is "memory"`},
		},
		{
			name:   "store.redis missing",
			mutate: func(c *gatewayv1.Config) { c.Store.Type = gatewayv1.StoreRedis },
			want:   []string{"store.redis: Required value"},
		},
		{
			name:   "store.redis.address without port",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.Address = "redis" },
			want:   []string{`store.redis.address: Invalid value: "redis"`},
		},
		{
			name:   "store.redis.address with a bad port",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.Address = "redis:70000" },
			want:   []string{`store.redis.address: Invalid value: "redis:70000"`},
		},
		{
			name:    "store.redis.address as a URL with a password",
			mutate:  func(c *gatewayv1.Config) { redis(c); c.Store.Redis.Address = "redis://:hunter2@redis:6379" },
			want:    []string{"store.redis.address: Invalid value", "passwordFile"},
			notWant: []string{"hunter2"},
		},
		{
			name:   "store.redis.username without a password",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.Username = "sluice" },
			want:   []string{"store.redis.passwordFile: Required value: must be set when username is"},
		},
		{
			name:   "store.redis.db",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.DB = -1 },
			want:   []string{"store.redis.db: Invalid value: -1"},
		},
		{
			name:   "store.redis.failMode",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.FailMode = "maybe" },
			want:   []string{`store.redis.failMode: Unsupported value: "maybe"`},
		},
		{
			name:   "store.redis.replicas",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.Replicas = -2 },
			want:   []string{"store.redis.replicas: Invalid value: -2"},
		},
		{
			name: "valid redis sentinel",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Address = ""
				c.Store.Redis.Sentinel = &gatewayv1.RedisSentinel{MasterName: "sluice", Addresses: []string{"s1:26379", "s2:26379"}}
			},
		},
		{
			name: "valid redis cluster",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Address = ""
				c.Store.Redis.Cluster = &gatewayv1.RedisCluster{Addresses: []string{"node-0:6379"}}
			},
		},
		{
			name:   "store.redis with no form",
			mutate: func(c *gatewayv1.Config) { redis(c); c.Store.Redis.Address = "" },
			want:   []string{"store.redis.address: Required value: must set exactly one of address (one server), sentinel or cluster"},
		},
		{
			name: "store.redis with two forms",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Cluster = &gatewayv1.RedisCluster{Addresses: []string{"node-0:6379"}}
			},
			want: []string{"store.redis.cluster: Forbidden: must not be set with address: set exactly one of address, sentinel and cluster"},
		},
		{
			name: "store.redis.sentinel without a master name or addresses",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Address = ""
				c.Store.Redis.Sentinel = &gatewayv1.RedisSentinel{}
			},
			want: []string{"store.redis.sentinel.masterName: Required value", "store.redis.sentinel.addresses: Required value: must list at least one host:port"},
		},
		{
			name: "store.redis.sentinel.addresses bad and twice",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Address = ""
				c.Store.Redis.Sentinel = &gatewayv1.RedisSentinel{MasterName: "sluice", Addresses: []string{"s1:26379", "s1", "s1:26379"}}
			},
			want: []string{`store.redis.sentinel.addresses[1]: Invalid value: "s1"`, `store.redis.sentinel.addresses[2]: Duplicate value: "s1:26379"`},
		},
		{
			name: "store.redis.sentinel.username without a password",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Address = ""
				c.Store.Redis.Sentinel = &gatewayv1.RedisSentinel{MasterName: "sluice", Addresses: []string{"s1:26379"}, Username: "watcher"}
			},
			want: []string{"store.redis.sentinel.passwordFile: Required value: must be set when username is"},
		},
		{
			name: "store.redis.cluster with a database",
			mutate: func(c *gatewayv1.Config) {
				redis(c)
				c.Store.Redis.Address, c.Store.Redis.DB = "", 2
				c.Store.Redis.Cluster = &gatewayv1.RedisCluster{Addresses: []string{"redis://:pw@node-0:6379"}}
			},
			want:    []string{"store.redis.db: Invalid value: 2: must be 0 with cluster", "store.redis.cluster.addresses[0]: Invalid value", "not a URL"},
			notWant: []string{"pw@"},
		},

		{
			name:   "jobs.maxAttempts",
			mutate: func(c *gatewayv1.Config) { c.Jobs.MaxAttempts = 21 },
			want:   []string{"jobs.maxAttempts: Invalid value: 21", "must be from 1 to 20"},
		},
		{
			name:   "jobs.reclaimAfter",
			mutate: func(c *gatewayv1.Config) { c.Jobs.ReclaimAfter = duration(-time.Second) },
			want:   []string{`jobs.reclaimAfter: Invalid value: "-1s"`},
		},
		{
			name:   "jobs.reclaimAfter below its floor",
			mutate: func(c *gatewayv1.Config) { c.Jobs.ReclaimAfter = duration(2 * time.Nanosecond) },
			want:   []string{`jobs.reclaimAfter: Invalid value: "2ns"`, "must be at least 1s"},
		},
		{
			name:   "jobs.resultTTL",
			mutate: func(c *gatewayv1.Config) { c.Jobs.ResultTTL = duration(-time.Hour) },
			want:   []string{`jobs.resultTTL: Invalid value: "-1h0m0s"`},
		},
		{
			name:   "jobs.workers",
			mutate: func(c *gatewayv1.Config) { c.Jobs.Workers = 1001 },
			want:   []string{"jobs.workers: Invalid value: 1001", "must be from 1 to 1000"},
		},
		{
			name:   "jobs.maxQueuedPerTenant",
			mutate: func(c *gatewayv1.Config) { c.Jobs.MaxQueuedPerTenant = 1_000_001 },
			want:   []string{"jobs.maxQueuedPerTenant: Invalid value: 1000001", "must be from 1 to 1000000"},
		},
		{
			name:   "jobs.maxBodyBytes",
			mutate: func(c *gatewayv1.Config) { c.Jobs.MaxBodyBytes = 64<<20 + 1 },
			want:   []string{"jobs.maxBodyBytes: Invalid value: 67108865", "must be from 1 to 67108864"},
		},
		{
			name:   "jobs.maxResultBytes",
			mutate: func(c *gatewayv1.Config) { c.Jobs.MaxResultBytes = -1 },
			want:   []string{"jobs.maxResultBytes: Invalid value: -1", "must be from 1 to 33554432"},
		},
		{
			name:   "jobs.maxBytesPerTenant below a body",
			mutate: func(c *gatewayv1.Config) { c.Jobs.MaxBodyBytes, c.Jobs.MaxBytesPerTenant = 1000, 999 },
			want:   []string{"jobs.maxBytesPerTenant: Invalid value: 999", "must be at least maxBodyBytes"},
		},

		{
			name: "global limit",
			mutate: func(c *gatewayv1.Config) {
				c.Global = []gatewayv1.Limit{{Dimension: "bytes", Amount: 1, Per: gatewayv1.PeriodSecond}}
			},
			want: []string{`global[0].dimension: Unsupported value: "bytes"`},
		},

		{
			name:   "providers[].name format",
			mutate: func(c *gatewayv1.Config) { openai(c).Name = "OpenAI" },
			want:   []string{`providers[0].name: Invalid value: "OpenAI"`},
		},
		{
			name:   "providers[].name missing",
			mutate: func(c *gatewayv1.Config) { openai(c).Name = "" },
			want:   []string{"providers[0].name: Required value"},
		},
		{
			name:   "providers[].name repeated",
			mutate: func(c *gatewayv1.Config) { c.Providers[1].Name = "openai" },
			want:   []string{`providers[1].name: Duplicate value: "openai"`},
		},
		{
			name:   "providers[].baseURL scheme",
			mutate: func(c *gatewayv1.Config) { openai(c).BaseURL = "ftp://files.example/v1" },
			want:   []string{`providers[0].baseURL: Invalid value: "ftp://files.example/v1"`},
		},
		{
			name:   "providers[].baseURL relative",
			mutate: func(c *gatewayv1.Config) { openai(c).BaseURL = "/v1" },
			want:   []string{`providers[0].baseURL: Invalid value: "/v1"`},
		},
		{
			name:   "providers[].baseURL missing",
			mutate: func(c *gatewayv1.Config) { openai(c).BaseURL = "" },
			want:   []string{"providers[0].baseURL: Required value"},
		},
		{
			name:   "providers[].baseURL missing on a paused provider",
			mutate: func(c *gatewayv1.Config) { openai(c).BaseURL, openai(c).Paused = "", true },
		},
		{
			name: "providers[].endpoints in place of baseURL",
			mutate: func(c *gatewayv1.Config) {
				openai(c).BaseURL, openai(c).Endpoints = "", []string{"http://10.0.3.7:8000/v1", "http://10.0.3.8:8000/v1"}
			},
		},
		{
			name:   "providers[].endpoints with baseURL",
			mutate: func(c *gatewayv1.Config) { openai(c).Endpoints = []string{"http://10.0.3.7:8000/v1"} },
			want:   []string{"providers[0].endpoints: Invalid value: 1: must be empty when baseURL is set"},
		},
		{
			name: "providers[].endpoints each a URL",
			mutate: func(c *gatewayv1.Config) {
				openai(c).BaseURL, openai(c).Endpoints = "", []string{"http://10.0.3.7:8000/v1", "10.0.3.8:8000"}
			},
			want: []string{`providers[0].endpoints[1]: Invalid value: "10.0.3.8:8000"`},
		},
		{
			name:    "providers[].baseURL with credentials",
			mutate:  func(c *gatewayv1.Config) { openai(c).BaseURL = "https://me:sk-secret@api.openai.example/v1" },
			want:    []string{"providers[0].baseURL: Invalid value", "apiKeyFile"},
			notWant: []string{"sk-secret"},
		},
		{
			name:    "providers[].baseURL with a query",
			mutate:  func(c *gatewayv1.Config) { openai(c).BaseURL = "https://api.example/v1?key=sk-secret" },
			want:    []string{"providers[0].baseURL: Invalid value", "no query"},
			notWant: []string{"sk-secret"},
		},
		{
			name:   "providers[].models empty",
			mutate: func(c *gatewayv1.Config) { c.Providers[1].Models = nil },
			want:   []string{"providers[1].models: Required value"},
		},
		{
			name:   "providers[].models[].name missing",
			mutate: func(c *gatewayv1.Config) { c.Providers[1].Models[0].Name = "" },
			want:   []string{"providers[1].models[0].name: Required value"},
		},
		{
			name:   "providers[].models[].name repeated in one provider",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[1].Name = "gpt-4o" },
			want:   []string{`providers[0].models[1].name: Duplicate value: "gpt-4o"`},
		},
		{
			name:   "providers[].models[].name pooled across providers",
			mutate: func(c *gatewayv1.Config) { c.Providers[1].Models[0].Name = "gpt-4o-mini" },
		},
		{
			name: "providers[].models[].name pooled with another encoding",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].Models[0] = gatewayv1.Model{Name: "gpt-4o", Encoding: "cl100k_base", DefaultMaxTokens: 256, MaxTokensParam: "max_tokens"}
			},
			want: []string{`providers[1].models[0].name: Invalid value: "gpt-4o": must have the same encoding ("o200k_base") in provider "openai", which serves it too`},
		},
		{
			name: "providers[].models[].name pooled with another defaultMaxTokens",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].Models[0] = gatewayv1.Model{Name: "gpt-4o-mini", DefaultMaxTokens: 100, MaxTokensParam: "max_tokens"}
			},
			want: []string{`providers[1].models[0].name: Invalid value: "gpt-4o-mini": must have the same defaultMaxTokens (256)`},
		},
		{
			name:   "providers[].models[].name an alias elsewhere",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[0].Aliases = []string{"llama"} },
			want:   []string{`providers[1].models[0].name: Invalid value: "llama": must name one model, but is an alias of "gpt-4o" in provider "openai"`},
		},
		{
			name: "providers[].models[].aliases naming another model elsewhere",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].Models[0].Aliases = []string{"gpt-4o-mini"}
			},
			want: []string{`providers[1].models[0].aliases[0]: Invalid value: "gpt-4o-mini": must name one model: provider "openai" has it for "gpt-4o-mini"`},
		},
		{
			name: "providers[].azure",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Azure = &gatewayv1.Azure{APIVersion: "2024-10-21", Deployments: map[string]string{"gpt-4o": "prod-4o"}}
			},
		},
		{
			name: "providers[].azure wrong",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Azure = &gatewayv1.Azure{APIVersion: "latest", Deployments: map[string]string{"gpt-5": "a/b"}}
			},
			want: []string{
				`providers[0].azure.apiVersion: Invalid value: "latest": must be an api-version such as 2024-10-21`,
				`providers[0].azure.deployments[gpt-5]: Invalid value: "gpt-5": must be the name of one of the provider's models`,
				`providers[0].azure.deployments[gpt-5]: Invalid value: "a/b": must be a deployment name`,
			},
		},
		{
			name: "providers[].azure on Pods",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].BaseURL, c.Providers[1].Endpoints = "", []string{"http://10.0.0.7:8000/v1"}
				c.Providers[1].Azure = &gatewayv1.Azure{APIVersion: "2024-10-21"}
			},
			want: []string{`providers[1].endpoints: Invalid value: 1: must be empty for an Azure provider`},
		},
		{
			name: "providers[].api anthropic",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].API, c.Providers[1].AnthropicVersion = gatewayv1.APIAnthropic, "2023-06-01"
			},
		},
		{
			name: "providers[].batches on the batch service of an OpenAI account",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Batches, openai(c).BatchQueueTokens = gatewayv1.BatchesService, 2_000_000
			},
		},
		{
			name: "providers[].batches on Pods",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].BaseURL, c.Providers[1].Endpoints = "", []string{"http://10.0.0.7:8000/v1"}
				c.Providers[1].Batches = gatewayv1.BatchesService
			},
			want: []string{`providers[1].batches: Invalid value: "Service": must be Queue for a self-hosted provider: it has no batch service`},
		},
		{
			name: "providers[].batches wrong",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Batches, openai(c).BatchQueueTokens = "Later", 10
				c.Providers[1].API, c.Providers[1].AnthropicVersion, c.Providers[1].Batches = gatewayv1.APIAnthropic, "2023-06-01", gatewayv1.BatchesService
			},
			want: []string{
				`providers[0].batches: Unsupported value: "Later": supported values: "Queue", "Service"`,
				`providers[0].batchQueueTokens: Invalid value: 10: must be zero unless batches is Service`,
				`providers[1].batches: Invalid value: "Service": must be Queue unless the provider is an OpenAI account: the gateway calls OpenAI's Batch API`,
			},
		},
		{
			name: "providers[].api wrong",
			mutate: func(c *gatewayv1.Config) {
				openai(c).API, openai(c).AnthropicVersion = "gemini", "2023-06-01"
				c.Providers[1].API, c.Providers[1].AnthropicVersion = gatewayv1.APIAnthropic, "latest"
			},
			want: []string{
				`providers[0].api: Unsupported value: "gemini"`,
				`providers[0].anthropicVersion: Invalid value: "2023-06-01": must be empty unless api is anthropic`,
				`providers[1].anthropicVersion: Invalid value: "latest": must be an anthropic-version such as 2023-06-01`,
			},
		},
		{
			name: "providers[].api anthropic on Azure",
			mutate: func(c *gatewayv1.Config) {
				openai(c).API, openai(c).AnthropicVersion = gatewayv1.APIAnthropic, "2023-06-01"
				openai(c).Azure = &gatewayv1.Azure{APIVersion: "2024-10-21"}
			},
			want: []string{`providers[0].azure: Invalid value: "azure": must be empty for an Anthropic provider`},
		},
		{
			name: "providers[].models[].name pooled across APIs",
			mutate: func(c *gatewayv1.Config) {
				c.Providers[1].API, c.Providers[1].AnthropicVersion = gatewayv1.APIAnthropic, "2023-06-01"
				c.Providers[1].Models[0].Name = "gpt-4o-mini"
			},
			want: []string{`providers[1].models[0].name: Invalid value: "gpt-4o-mini": must be served by providers of one API: provider "openai" serves it in the openai API, this one in the anthropic API`},
		},
		{
			name: "providers[].breaker",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Breaker = gatewayv1.Breaker{Failures: 101, OpenFor: duration(-time.Second)}
			},
			want: []string{"providers[0].breaker.failures: Invalid value: 101", "providers[0].breaker.openFor: Invalid value"},
		},
		{
			name:   "providers[].models[].encoding",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[0].Encoding = "gpt2" },
			want:   []string{`providers[0].models[0].encoding: Unsupported value: "gpt2"`, `"o200k_base"`},
		},
		{
			name:   "providers[].models[].defaultMaxTokens",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[1].DefaultMaxTokens = -5 },
			want:   []string{"providers[0].models[1].defaultMaxTokens: Invalid value: -5"},
		},
		{
			name:   "providers[].models[].maxTokensParam",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[0].MaxTokensParam = "max_new_tokens" },
			want:   []string{`providers[0].models[0].maxTokensParam: Unsupported value: "max_new_tokens"`, `"max_tokens"`},
		},
		{
			name:   "providers[].admissionCount",
			mutate: func(c *gatewayv1.Config) { openai(c).AdmissionCount = "Bytes" },
			want:   []string{`providers[0].admissionCount: Unsupported value: "Bytes"`, `"Characters"`},
		},
		{
			name:   "providers[].requestsPerMinute",
			mutate: func(c *gatewayv1.Config) { openai(c).RequestsPerMinute = -1 },
			want:   []string{"providers[0].requestsPerMinute: Invalid value: -1"},
		},
		{
			name:   "providers[].tokensPerMinute",
			mutate: func(c *gatewayv1.Config) { openai(c).TokensPerMinute = -2 },
			want:   []string{"providers[0].tokensPerMinute: Invalid value: -2"},
		},
		{
			name:   "providers[].maxInFlight",
			mutate: func(c *gatewayv1.Config) { openai(c).MaxInFlight = -3 },
			want:   []string{"providers[0].maxInFlight: Invalid value: -3"},
		},
		{
			name:   "providers[].headroomPercent",
			mutate: func(c *gatewayv1.Config) { openai(c).HeadroomPercent = 101 },
			want:   []string{"providers[0].headroomPercent: Invalid value: 101", "from 1 to 100"},
		},
		{
			name: "providers[].limits as Anthropic's and Gemini's",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Limits = []gatewayv1.Limit{
					{Dimension: gatewayv1.DimensionInputTokens, Amount: 30000, Per: gatewayv1.PeriodMinute},
					{Dimension: gatewayv1.DimensionOutputTokens, Amount: 8000, Per: gatewayv1.PeriodMinute},
					{Dimension: gatewayv1.DimensionRequests, Amount: 1000, Per: gatewayv1.PeriodDay},
					{Dimension: gatewayv1.DimensionTokens, Amount: 1_000_000, Per: gatewayv1.PeriodDay},
				}
				openai(c).TimeZone, openai(c).OutputTokenWeight = "America/Los_Angeles", 5
				openai(c).CachedInputCounts = new(bool)
			},
		},
		{
			name: "providers[].limits of what a provider does not limit",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Limits = []gatewayv1.Limit{
					{Dimension: gatewayv1.DimensionDollars, Dollars: "1", Per: gatewayv1.PeriodMinute},
					{Dimension: gatewayv1.DimensionTokens, Amount: 10, Per: gatewayv1.PeriodHour, Burst: 5, OnLimit: gatewayv1.BehaviorReject},
					{Dimension: gatewayv1.DimensionOutputTokens, Per: gatewayv1.PeriodMinute},
				}
			},
			want: []string{
				`providers[0].limits[0].dimension: Unsupported value: "dollars"`, `providers[0].limits[0].dollars: Invalid value: "1": must be empty`,
				`providers[0].limits[1].per: Unsupported value: "hour"`, "providers[0].limits[1].burst: Invalid value: 5", `providers[0].limits[1].onLimit: Invalid value: "Reject"`,
				"providers[0].limits[2].amount: Invalid value: 0",
			},
		},
		{
			name: "providers[].limits twice, or beside the field that says it",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Limits = []gatewayv1.Limit{
					{Dimension: gatewayv1.DimensionRequests, Amount: 10, Per: gatewayv1.PeriodMinute},
					{Dimension: gatewayv1.DimensionInputTokens, Amount: 10, Per: gatewayv1.PeriodDay},
					{Dimension: gatewayv1.DimensionInputTokens, Amount: 20, Per: gatewayv1.PeriodDay},
				}
			},
			want: []string{`providers[0].limits[0]: Duplicate value: "requests per minute"`, `providers[0].limits[2]: Duplicate value: "inputTokens per day"`},
		},
		{
			name: "providers[].limits past what the limiter holds",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Limits = []gatewayv1.Limit{{Dimension: gatewayv1.DimensionOutputTokens, Amount: 1 << 41, Per: gatewayv1.PeriodMinute}}
			},
			want: []string{"providers[0].limits[0].amount: Invalid value: 2199023255552: must fit the gateway's limiter"},
		},
		{
			name: "providers[].timeZone and outputTokenWeight",
			mutate: func(c *gatewayv1.Config) {
				openai(c).TimeZone, openai(c).OutputTokenWeight = "Pacific", 101
			},
			want: []string{`providers[0].timeZone: Invalid value: "Pacific": must be an IANA time zone`, "providers[0].outputTokenWeight: Invalid value: 101"},
		},
		{
			name:   "providers[].prices.inputPerMillion as a float",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.InputPerMillion = "1e3" },
			want:   []string{`providers[0].prices.inputPerMillion: Invalid value: "1e3"`},
		},
		{
			name:   "providers[].prices.outputPerMillion negative",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.OutputPerMillion = "-1" },
			want:   []string{`providers[0].prices.outputPerMillion: Invalid value: "-1"`},
		},
		{
			name: "providers[].prices with every class and tiers",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Prices = gatewayv1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", CacheWritePerMillion: "3.125",
					AudioInputPerMillion: "40", OutputPerMillion: "10", AudioOutputPerMillion: "80", Tiers: []gatewayv1.TierPrices{
						{Name: "priority", InputPerMillion: "4.25", CachedInputPerMillion: "2.125", OutputPerMillion: "17"},
						{Name: "flex", InputPerMillion: "1.25"},
					}}
			},
		},
		{
			name:   "providers[].prices.cachedInputPerMillion as a float",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.CachedInputPerMillion = "1.25e0" },
			want:   []string{`providers[0].prices.cachedInputPerMillion: Invalid value: "1.25e0"`, "decimal dollar amount"},
		},
		{
			name:   "providers[].prices.audioOutputPerMillion negative",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.AudioOutputPerMillion = "-80" },
			want:   []string{`providers[0].prices.audioOutputPerMillion: Invalid value: "-80"`},
		},
		{
			name:   "providers[].prices.tiers[] without a name",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.Tiers = []gatewayv1.TierPrices{{InputPerMillion: "5"}} },
			want:   []string{"providers[0].prices.tiers[0].name: Required value", "service_tier"},
		},
		{
			name: "providers[].prices.tiers[] named twice",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Prices.Tiers = []gatewayv1.TierPrices{{Name: "flex"}, {Name: "priority"}, {Name: "flex"}}
			},
			want: []string{`providers[0].prices.tiers[2].name: Duplicate value: "flex"`},
		},
		{
			name:   "providers[].prices.tiers[] named default",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.Tiers = []gatewayv1.TierPrices{{Name: "default"}} },
			want:   []string{`providers[0].prices.tiers[0].name: Invalid value: "default"`, "standard prices"},
		},
		{
			name:   "providers[].prices.tiers[] named in capitals",
			mutate: func(c *gatewayv1.Config) { openai(c).Prices.Tiers = []gatewayv1.TierPrices{{Name: "Priority"}} },
			want:   []string{`providers[0].prices.tiers[0].name: Invalid value: "Priority"`, "lower-case"},
		},
		{
			name: "providers[].prices.tiers[] with a bad price",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Prices.Tiers = []gatewayv1.TierPrices{{Name: "flex", CacheWritePerMillion: "1,5"}}
			},
			want: []string{`providers[0].prices.tiers[0].cacheWritePerMillion: Invalid value: "1,5"`},
		},
		{
			name: "providers[].prices.tiers too many",
			mutate: func(c *gatewayv1.Config) {
				for i := range 17 {
					openai(c).Prices.Tiers = append(openai(c).Prices.Tiers, gatewayv1.TierPrices{Name: fmt.Sprintf("t%d", i)})
				}
			},
			want: []string{"providers[0].prices.tiers: Too many: 17: must have at most 16 items"},
		},
		{
			name: "providers[].models[].prices of a snapshot",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Models = append(openai(c).Models, gatewayv1.Model{Name: "gpt-4o-2024-05-13",
					Prices: &gatewayv1.Prices{InputPerMillion: "5", OutputPerMillion: "15"}})
			},
		},
		{
			name: "providers[].models[].prices with a bad price and a tier without a name",
			mutate: func(c *gatewayv1.Config) {
				openai(c).Models[1].Prices = &gatewayv1.Prices{InputPerMillion: "0.15", OutputPerMillion: "x", Tiers: []gatewayv1.TierPrices{{}}}
			},
			want: []string{`providers[0].models[1].prices.outputPerMillion: Invalid value: "x"`, "providers[0].models[1].prices.tiers[0].name: Required value"},
		},
		{
			name:   "providers[].spendPerMinute too precise",
			mutate: func(c *gatewayv1.Config) { openai(c).SpendPerMinute = "0.0000001" },
			want:   []string{`providers[0].spendPerMinute: Invalid value: "0.0000001"`},
		},
		{
			name:   "providers[].spendPerMonth too large",
			mutate: func(c *gatewayv1.Config) { openai(c).SpendPerMonth = "99999999999999999999" },
			want:   []string{`providers[0].spendPerMonth: Invalid value: "99999999999999999999"`, "at most"},
		},
		{
			name:   "providers[].retry.maxAttempts",
			mutate: func(c *gatewayv1.Config) { openai(c).Retry.MaxAttempts = 11 },
			want:   []string{"providers[0].retry.maxAttempts: Invalid value: 11", "from 1 to 10"},
		},
		{
			name:   "providers[].retry.baseDelay",
			mutate: func(c *gatewayv1.Config) { openai(c).Retry.BaseDelay = duration(-time.Second) },
			want:   []string{`providers[0].retry.baseDelay: Invalid value: "-1s"`},
		},
		{
			name:   "providers[].retry.maxDelay below baseDelay",
			mutate: func(c *gatewayv1.Config) { openai(c).Retry.MaxDelay = duration(100 * time.Millisecond) },
			want:   []string{`providers[0].retry.maxDelay: Invalid value: "100ms"`, "baseDelay (500ms)"},
		},
		{
			name:   "providers[].models[].aliases repeating a model's name",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[0].Aliases = []string{"mini", openai(c).Models[0].Name} },
			want:   []string{"providers[0].models[0].aliases[1]: Duplicate value"},
		},
		{
			name:   "providers[].models[].aliases empty",
			mutate: func(c *gatewayv1.Config) { openai(c).Models[0].Aliases = []string{""} },
			want:   []string{"providers[0].models[0].aliases[0]: Required value"},
		},
		{
			name:   "providers[].timeout",
			mutate: func(c *gatewayv1.Config) { openai(c).Timeout = duration(-time.Second) },
			want:   []string{`providers[0].timeout: Invalid value: "-1s"`},
		},
		{
			name:   "providers[].stallTimeout",
			mutate: func(c *gatewayv1.Config) { openai(c).StallTimeout = duration(-time.Second) },
			want:   []string{`providers[0].stallTimeout: Invalid value: "-1s"`},
		},
		{
			name:   "providers[].callTimeout below timeout",
			mutate: func(c *gatewayv1.Config) { openai(c).CallTimeout = duration(30 * time.Second) },
			want:   []string{`providers[0].callTimeout: Invalid value: "30s"`, "at least timeout (1m0s)"},
		},

		{
			name:   "tenants[].name missing",
			mutate: func(c *gatewayv1.Config) { acme(c).Name = "" },
			want:   []string{"tenants[0].name: Required value"},
		},
		{
			name:   "tenants[].uid format",
			mutate: func(c *gatewayv1.Config) { acme(c).UID = "a:b" },
			want:   []string{`tenants[0].uid: Invalid value: "a:b"`, "must be at most 128 letters"},
		},
		{
			name:   "tenants[].uid repeated",
			mutate: func(c *gatewayv1.Config) { acme(c).UID = c.Tenants[1].Name },
			want:   []string{`tenants[1].uid: Duplicate value: "globex"`},
		},
		{
			name:   "tenants[].jobScope",
			mutate: func(c *gatewayv1.Config) { acme(c).JobScope = "Everyone" },
			want:   []string{`tenants[0].jobScope: Unsupported value: "Everyone"`},
		},
		{
			name:   "tenants[].name repeated",
			mutate: func(c *gatewayv1.Config) { c.Tenants[1].Name = "acme" },
			want:   []string{`tenants[1].name: Duplicate value: "acme"`},
		},
		{
			name:   "tenants[].keys empty",
			mutate: func(c *gatewayv1.Config) { acme(c).Keys = nil },
			want:   []string{"tenants[0].keys: Required value"},
		},
		{
			name:    "tenants[].keys[].sha256 holding the key itself",
			mutate:  func(c *gatewayv1.Config) { acme(c).Keys[0].SHA256 = "sk-acme-alice" },
			want:    []string{"tenants[0].keys[0].sha256: Invalid value", "64 characters"},
			notWant: []string{"sk-acme-alice"},
		},
		{
			name: "tenants[].keys[].sha256 in upper case",
			mutate: func(c *gatewayv1.Config) {
				acme(c).Keys[0].SHA256 = "860EDB4DFAA237CB0C5019E8A1137FECBEAF4A7EF0DD63819E62A6DE82EAE7FB"
			},
			want:    []string{"tenants[0].keys[0].sha256: Invalid value", "lower-case"},
			notWant: []string{"860EDB4D"},
		},
		{
			name:   "tenants[].keys[].user missing",
			mutate: func(c *gatewayv1.Config) { acme(c).Keys[0].User = "" },
			want:   []string{"tenants[0].keys[0].user: Required value"},
		},
		{
			name:    "tenants[].keys[].sha256 repeated across tenants",
			mutate:  func(c *gatewayv1.Config) { c.Tenants[1].Keys[0].SHA256 = acme(c).Keys[0].SHA256 },
			want:    []string{"tenants[1].keys[0].sha256: Invalid value", "equals tenants[0].keys[0].sha256"},
			notWant: []string{gatewayv1.HashKey("sk-acme-alice")},
		},
		{
			name:   "tenants[].providers empty",
			mutate: func(c *gatewayv1.Config) { acme(c).Providers = nil },
			want:   []string{"tenants[0].providers: Required value"},
		},
		{
			name:   "tenants[].providers unknown",
			mutate: func(c *gatewayv1.Config) { c.Tenants[1].Providers[1] = "anthropic" },
			want:   []string{`tenants[1].providers[1]: Unsupported value: "anthropic"`, `"openai", "local"`},
		},
		{
			name:   "tenants[].providers repeated",
			mutate: func(c *gatewayv1.Config) { c.Tenants[1].Providers[1] = "openai" },
			want:   []string{`tenants[1].providers[1]: Duplicate value: "openai"`},
		},
		{
			name:   "tenants[].priority",
			mutate: func(c *gatewayv1.Config) { acme(c).Priority = "Urgent" },
			want:   []string{`tenants[0].priority: Unsupported value: "Urgent"`},
		},
		{
			name:   "tenants[].weight",
			mutate: func(c *gatewayv1.Config) { acme(c).Weight = 1001 },
			want:   []string{"tenants[0].weight: Invalid value: 1001", "from 1 to 1000"},
		},
		{
			name:   "limit dimension missing",
			mutate: func(c *gatewayv1.Config) { perUser(c).Dimension = "" },
			want:   []string{"tenants[0].perUser[0].dimension: Required value"},
		},
		{
			name:   "limit per unknown",
			mutate: func(c *gatewayv1.Config) { perTenant(c).Per = "week" },
			want:   []string{`tenants[0].perTenant[0].per: Unsupported value: "week"`},
		},
		{
			name:   "limit amount missing",
			mutate: func(c *gatewayv1.Config) { perUser(c).Amount = 0 },
			want:   []string{"tenants[0].perUser[0].amount: Invalid value: 0"},
		},
		{
			name:   "limit amount negative",
			mutate: func(c *gatewayv1.Config) { perTenant(c).Amount = -10 },
			want:   []string{"tenants[0].perTenant[0].amount: Invalid value: -10"},
		},
		{
			name:   "limit amount on dollars",
			mutate: func(c *gatewayv1.Config) { dollarsPerMinute(perTenant(c)); perTenant(c).Amount = 5 },
			want:   []string{"tenants[0].perTenant[0].amount: Invalid value: 5", "set dollars"},
		},
		{
			name:   "limit dollars missing",
			mutate: func(c *gatewayv1.Config) { dollarsPerMinute(perTenant(c)); perTenant(c).Dollars = "" },
			want:   []string{"tenants[0].perTenant[0].dollars: Required value"},
		},
		{
			name:   "limit dollars zero",
			mutate: func(c *gatewayv1.Config) { dollarsPerMinute(perTenant(c)); perTenant(c).Dollars = "0.00" },
			want:   []string{`tenants[0].perTenant[0].dollars: Invalid value: "0.00"`, "more than 0"},
		},
		{
			name:   "limit dollars on requests",
			mutate: func(c *gatewayv1.Config) { perTenant(c).Dollars = "5" },
			want:   []string{`tenants[0].perTenant[0].dollars: Invalid value: "5"`, "set amount"},
		},
		{
			name:   "limit burst negative",
			mutate: func(c *gatewayv1.Config) { perTenant(c).Burst = -1 },
			want:   []string{"tenants[0].perTenant[0].burst: Invalid value: -1"},
		},
		{
			name:   "limit burst on a calendar window",
			mutate: func(c *gatewayv1.Config) { perUser(c).Burst = 10 },
			want:   []string{"tenants[0].perUser[0].burst: Invalid value: 10", "calendar window"},
		},
		{
			name:   "limit burst on dollars",
			mutate: func(c *gatewayv1.Config) { dollarsPerMinute(perTenant(c)); perTenant(c).Burst = 2 },
			want:   []string{"tenants[0].perTenant[0].burst: Invalid value: 2", "dollars amount"},
		},
		{
			name:   "limit onLimit unknown",
			mutate: func(c *gatewayv1.Config) { perTenant(c).OnLimit = "Drop" },
			want:   []string{`tenants[0].perTenant[0].onLimit: Unsupported value: "Drop"`, `"Reject", "Queue"`},
		},
		{
			name:   "limit onLimit Queue on a calendar window",
			mutate: func(c *gatewayv1.Config) { perUser(c).OnLimit = gatewayv1.BehaviorQueue },
			want:   []string{`tenants[0].perUser[0].onLimit: Invalid value: "Queue"`, "midnight"},
		},
		{
			name: "limit inFlight at every level of a plan",
			mutate: func(c *gatewayv1.Config) {
				acme(c).PerUser = append(acme(c).PerUser, inFlight(2))
				acme(c).PerTenant = append(acme(c).PerTenant, inFlight(5))
				acme(c).Endpoints[0].Limits = append(acme(c).Endpoints[0].Limits, gatewayv1.Limit{Dimension: gatewayv1.DimensionInFlight, Amount: 3, OnLimit: gatewayv1.BehaviorReject})
			},
		},
		{
			name:   "limit inFlight with a period",
			mutate: func(c *gatewayv1.Config) { *perTenant(c) = inFlight(5); perTenant(c).Per = gatewayv1.PeriodMinute },
			want:   []string{`tenants[0].perTenant[0].per: Invalid value: "minute": must be empty for inFlight`},
		},
		{
			name:   "limit inFlight with a burst",
			mutate: func(c *gatewayv1.Config) { *perUser(c) = inFlight(2); perUser(c).Burst = 4 },
			want:   []string{"tenants[0].perUser[0].burst: Invalid value: 4: must be 0 for inFlight"},
		},
		{
			name:   "limit inFlight with dollars",
			mutate: func(c *gatewayv1.Config) { *perTenant(c) = inFlight(5); perTenant(c).Dollars = "5" },
			want:   []string{`tenants[0].perTenant[0].dollars: Invalid value: "5": must be empty for inFlight`},
		},
		{
			name:   "limit inFlight without an amount",
			mutate: func(c *gatewayv1.Config) { *perTenant(c) = inFlight(0) },
			want:   []string{"tenants[0].perTenant[0].amount: Invalid value: 0: must be more than 0"},
		},
		{
			name:   "limit inFlight in global",
			mutate: func(c *gatewayv1.Config) { c.Global = []gatewayv1.Limit{inFlight(100)} },
			want:   []string{`global[0].dimension: Invalid value: "inFlight": must not be inFlight in global`},
		},
		{
			name:   "tenants[].endpoints[].endpoint unknown",
			mutate: func(c *gatewayv1.Config) { acme(c).Endpoints[0].Endpoint = "images" },
			want:   []string{`tenants[0].endpoints[0].endpoint: Unsupported value: "images"`},
		},
		{
			name: "tenants[].endpoints[].endpoint repeated",
			mutate: func(c *gatewayv1.Config) {
				acme(c).Endpoints = append(acme(c).Endpoints, acme(c).Endpoints[0])
			},
			want: []string{`tenants[0].endpoints[1].endpoint: Duplicate value: "chat"`},
		},
		{
			name:   "tenants[].endpoints[].limits empty",
			mutate: func(c *gatewayv1.Config) { acme(c).Endpoints[0].Limits = nil },
			want:   []string{"tenants[0].endpoints[0].limits: Required value"},
		},
		{
			name:   "tenants[].endpoints[].limits[] invalid",
			mutate: func(c *gatewayv1.Config) { acme(c).Endpoints[0].Limits[0].Amount = -60 },
			want:   []string{"tenants[0].endpoints[0].limits[0].amount: Invalid value: -60"},
		},
		{
			name:   "tenants[].budget.amount missing",
			mutate: func(c *gatewayv1.Config) { acme(c).Budget.Amount = "" },
			want:   []string{"tenants[0].budget.amount: Required value"},
		},
		{
			name:   "tenants[].budget.amount zero",
			mutate: func(c *gatewayv1.Config) { acme(c).Budget.Amount = "0" },
			want:   []string{`tenants[0].budget.amount: Invalid value: "0"`},
		},
		{
			name:   "tenants[].budget.amount a float",
			mutate: func(c *gatewayv1.Config) { acme(c).Budget.Amount = "5e3" },
			want:   []string{`tenants[0].budget.amount: Invalid value: "5e3"`},
		},
		{
			name:   "tenants[].budget.period a rate",
			mutate: func(c *gatewayv1.Config) { acme(c).Budget.Period = gatewayv1.PeriodMinute },
			want:   []string{`tenants[0].budget.period: Unsupported value: "minute"`, `"day", "month"`},
		},
		{
			name:   "tenants[].timeZone unknown",
			mutate: func(c *gatewayv1.Config) { acme(c).TimeZone = "Mars/Olympus_Mons" },
			want:   []string{`tenants[0].timeZone: Invalid value: "Mars/Olympus_Mons"`},
		},
		{
			name:   "tenants[].timeZone Local",
			mutate: func(c *gatewayv1.Config) { acme(c).TimeZone = "Local" },
			want:   []string{`tenants[0].timeZone: Invalid value: "Local"`},
		},
		{
			name:   "tenants[].maxWait too long",
			mutate: func(c *gatewayv1.Config) { acme(c).MaxWait = duration(11 * time.Minute) },
			want:   []string{`tenants[0].maxWait: Invalid value: "11m0s"`, "at most 10m0s"},
		},
		{
			name:   "tenants[].maxWait negative",
			mutate: func(c *gatewayv1.Config) { acme(c).MaxWait = duration(-time.Second) },
			want:   []string{`tenants[0].maxWait: Invalid value: "-1s"`},
		},
		{
			name: "tenants[].degrade without a budget",
			mutate: func(c *gatewayv1.Config) {
				c.Tenants[1].Degrade = &gatewayv1.Degrade{Model: "gpt-4o", Fallback: "llama", BelowPercent: 10}
			},
			want: []string{"tenants[1].budget: Required value", "degrade"},
		},
		{
			name:   "tenants[].degrade.model unknown",
			mutate: func(c *gatewayv1.Config) { acme(c).Degrade.Model = "gpt-5" },
			want:   []string{`tenants[0].degrade.model: Invalid value: "gpt-5"`},
		},
		{
			name:   "tenants[].degrade.model missing",
			mutate: func(c *gatewayv1.Config) { acme(c).Degrade.Model = "" },
			want:   []string{"tenants[0].degrade.model: Required value"},
		},
		{
			name:   "tenants[].degrade.fallback on a provider the tenant may not use",
			mutate: func(c *gatewayv1.Config) { acme(c).Degrade.Fallback = "llama" },
			want:   []string{`tenants[0].degrade.fallback: Invalid value: "llama"`, "tenant's providers"},
		},
		{
			name:   "tenants[].degrade.fallback the same model",
			mutate: func(c *gatewayv1.Config) { acme(c).Degrade.Fallback = "gpt-4o" },
			want:   []string{`tenants[0].degrade.fallback: Invalid value: "gpt-4o"`, "must differ"},
		},
		{
			name:   "providers[].spendPerMinute past what the limiter holds",
			mutate: func(c *gatewayv1.Config) { openai(c).SpendPerMinute = "2000000" },
			want:   []string{`providers[0].spendPerMinute: Invalid value: "2000000": must fit the gateway's limiter`, "must be positive and at most 1099511627776"},
		},
		{
			name:   "a rate finer than the limiter holds",
			mutate: func(c *gatewayv1.Config) { perUser(c).Amount, perUser(c).Per = 2_000_000_000, gatewayv1.PeriodSecond },
			want:   []string{`tenants[0].perUser[0].per: Invalid value: "second": must fit the gateway's limiter`},
		},
		{
			name: "a burst too large to refill",
			mutate: func(c *gatewayv1.Config) {
				perUser(c).Dimension, perUser(c).Amount, perUser(c).Per, perUser(c).Burst = gatewayv1.DimensionTokens, 1, gatewayv1.PeriodHour, 1<<40
			},
			want: []string{"tenants[0].perUser[0].per", "takes too long to refill"},
		},
		{
			name:   "tenants[].degrade.belowPercent",
			mutate: func(c *gatewayv1.Config) { acme(c).Degrade.BelowPercent = 100 },
			want:   []string{"tenants[0].degrade.belowPercent: Invalid value: 100", "from 1 to 99"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(c)
			data, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = gatewayv1.Parse(data)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse() error = %v, want nil", err)
				}
				return
			}
			checkError(t, err, tc.want, tc.notWant)
		})
	}
}

func TestValidateOneErrorPerProblem(t *testing.T) {
	c := validConfig()
	c.Default()
	c.Tenants[1].Weight = 0
	c.Providers[1].RequestsPerMinute = -1
	err := c.Validate()
	checkError(t, err, []string{"tenants[1].weight", "providers[1].requestsPerMinute"}, nil)
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("Validate() error = %T, want a utilerrors.Aggregate", err)
	}
	if got, want := len(agg.Errors()), 2; got != want {
		t.Errorf("Validate() returned %d errors, want %d: %v", got, want, err)
	}
}

// TestValidateProviderPaths checks that ValidateProvider reports each field
// at the path ProviderPaths gives for it, and nowhere else: a provider
// wrong in every field, checked with every path a root of its own.
func TestValidateProviderPaths(t *testing.T) {
	var paths gatewayv1.ProviderPaths
	v := reflect.ValueOf(&paths).Elem()
	var roots []string
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Limit" {
			paths.Limit = func(i int, _ gatewayv1.Limit) *field.Path { return field.NewPath(name).Index(i) }
		} else {
			v.Field(i).Set(reflect.ValueOf(field.NewPath(name)))
		}
		roots = append(roots, name)
	}
	bad := gatewayv1.Provider{
		RequestsPerMinute: -1, TokensPerMinute: -1, MaxInFlight: -1,
		Limits:   []gatewayv1.Limit{{Dimension: gatewayv1.DimensionDollars, Per: gatewayv1.PeriodHour}},
		TimeZone: "Mars/Olympus_Mons", OutputTokenWeight: -1,
		Prices:         gatewayv1.Prices{InputPerMillion: "x", OutputPerMillion: "x"},
		SpendPerMinute: "x", SpendPerMonth: "x",
		Azure:            &gatewayv1.Azure{APIVersion: "x"},
		Breaker:          gatewayv1.Breaker{Failures: -1},
		AnthropicVersion: "2023-06-01",
		BatchQueueTokens: -1,
	}

	// baseURL and endpoints are reported one at a time: neither set, then both.
	both := gatewayv1.Provider{BaseURL: "http://h", Endpoints: []string{"http://p"}}

	var got []string
	for _, err := range append(gatewayv1.ValidateProvider(paths, &bad), gatewayv1.ValidateProvider(paths, &both)...) {
		root, _, _ := strings.Cut(err.Field, ".")
		root, _, _ = strings.Cut(root, "[")
		got = append(got, root)
	}
	slices.Sort(roots)
	slices.Sort(got)
	if diff := cmp.Diff(roots, slices.Compact(got)); diff != "" {
		t.Errorf("roots of the error paths (-want +got):\n%s", diff)
	}
}

func TestValidateTenantTerms(t *testing.T) {
	providers := validConfig().Providers[:1] // openai, which serves gpt-4o and gpt-4o-mini
	spec := field.NewPath("spec")
	tests := []struct {
		name   string
		mutate func(t *gatewayv1.Tenant)
		want   []string // the errors, in order
	}{
		{name: "terms without a name or keys", mutate: func(*gatewayv1.Tenant) {}},
		{
			name:   "a provider not among providers",
			mutate: func(t *gatewayv1.Tenant) { t.Providers = append(t.Providers, "local") },
			want:   []string{`spec.providers[1]: Unsupported value: "local": supported values: "openai"`},
		},
		{
			name:   "a limit",
			mutate: func(t *gatewayv1.Tenant) { t.PerUser[0].Amount = -1 },
			want:   []string{"spec.perUser[0].amount: Invalid value: -1: must be more than 0"},
		},
		{
			name:   "degrade to a model no provider serves",
			mutate: func(t *gatewayv1.Tenant) { t.Degrade.Fallback = "llama" },
			want:   []string{`spec.degrade.fallback: Invalid value: "llama": must be a model of one of the tenant's providers`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := validConfig().Tenants[0]
			tenant.Name, tenant.Keys = "", nil
			tc.mutate(&tenant)
			tenant.Default()

			var got []string
			for _, err := range gatewayv1.ValidateTenantTerms(spec, &tenant, providers) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ValidateTenantTerms() errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateTenantNamesAndKeys(t *testing.T) {
	c := validConfig()
	c.Default()
	tenant := c.Tenants[0]
	tenant.Name, tenant.Keys = "", nil

	var got []string
	for _, err := range gatewayv1.ValidateTenant(field.NewPath("tenant"), &tenant, c.Providers) {
		got = append(got, err.Error())
	}
	want := []string{"tenant.name: Required value", "tenant.keys: Required value: at least one key"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ValidateTenant() errors (-want +got):\n%s", diff)
	}
}
