package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/test/cluster"
)

const namespace = "default"

// apiServer is the kube-apiserver, with the CRDs installed, that every test of this package
// shares; each test works in a namespace of its own.
var apiServer = &cluster.Shared{CRDs: "../../config/crd/bases"}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "v1alpha1: stop kube-apiserver: %v\n", err)
	}
	os.Exit(code)
}

// startAPIServer returns the shared API server's configuration, starting it on first use, or
// skips the test under -short.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	return apiServer.Config(t)
}

// newClient returns a client of the shared API server.
func newClient(t *testing.T) client.Client {
	t.Helper()
	cfg := startAPIServer(t)
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hostedQuota is a valid hosted ProviderQuota with every field set.
func hostedQuota() *v1alpha1.ProviderQuota {
	return &v1alpha1.ProviderQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "openai", Namespace: namespace},
		Spec: v1alpha1.ProviderQuotaSpec{
			API:     v1alpha1.ProviderAPIOpenAI,
			BaseURL: "https://api.openai.com/v1",
			Models: []v1alpha1.Model{
				{Name: "gpt-4o", Encoding: v1alpha1.EncodingO200kBase, DefaultMaxTokens: 512, MaxTokensParam: v1alpha1.MaxTokensParamCompletion},
				{Name: "gpt-4o-mini"},
				{Name: "gpt-4o-2024-05-13", Prices: &v1alpha1.Prices{InputPerMillion: "5", OutputPerMillion: "15"}},
			},
			Limits: &v1alpha1.ProviderLimits{RequestsPerMinute: 1500, TokensPerMinute: 300000, MaxInFlight: 200,
				InputTokensPerMinute: 200000, OutputTokensPerMinute: 40000, RequestsPerDay: 100000,
				TokensPerDay: 20000000, InputTokensPerDay: 15000000, OutputTokensPerDay: 5000000},
			TimeZone:          "America/Los_Angeles",
			CachedInputCounts: ptr.To(false),
			OutputTokenWeight: 5,
			AdmissionCount:    v1alpha1.AdmissionCountCharacters,
			Batches:           v1alpha1.BatchesQueue,
			HeadroomPercent:   95,
			Prices: &v1alpha1.Prices{InputPerMillion: "2.50", CachedInputPerMillion: "1.25", CacheWritePerMillion: "3.125",
				AudioInputPerMillion: "40", OutputPerMillion: "10", AudioOutputPerMillion: "80", Tiers: []v1alpha1.TierPrices{
					{Name: "priority", InputPerMillion: "4.25", CachedInputPerMillion: "2.125", CacheWritePerMillion: "5.3125",
						AudioInputPerMillion: "80", OutputPerMillion: "17", AudioOutputPerMillion: "160"},
					{Name: "flex", InputPerMillion: "1.25", OutputPerMillion: "5"},
				}},
			Spend: &v1alpha1.Spend{PerMinute: "0.50", PerMonth: "5000"},
			Retry: &v1alpha1.Retry{
				MaxAttempts: 4,
				BaseDelay:   metav1.Duration{Duration: time.Second},
				MaxDelay:    metav1.Duration{Duration: 20 * time.Second},
			},
			Timeout:         metav1.Duration{Duration: 2 * time.Minute},
			StallTimeout:    metav1.Duration{Duration: 2 * time.Minute},
			CallTimeout:     metav1.Duration{Duration: 10 * time.Minute},
			Breaker:         &v1alpha1.Breaker{Failures: 3, OpenFor: metav1.Duration{Duration: time.Minute}},
			APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "openai", Key: "token"},
		},
	}
}

// selfHostedQuota is a valid self-hosted ProviderQuota with every field set.
func selfHostedQuota() *v1alpha1.ProviderQuota {
	return &v1alpha1.ProviderQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: namespace},
		Spec: v1alpha1.ProviderQuotaSpec{
			SelfHosted: &v1alpha1.SelfHosted{
				Selector:             metav1.LabelSelector{MatchLabels: map[string]string{"app": "vllm"}},
				Port:                 8000,
				Engine:               v1alpha1.EngineVLLM,
				GPUsPerPod:           2,
				MaxConcurrencyPerGPU: 16,
				GPUQuota:             ptr.To[int32](8),
			},
			Models: []v1alpha1.Model{{Name: "llama-3.1-8b", Encoding: v1alpha1.EncodingCL100kBase}},
			Limits: &v1alpha1.ProviderLimits{TokensPerMinute: 1000000},
		},
	}
}

// plan is a valid TenantPlan with every field set.
func plan() *v1alpha1.TenantPlan {
	return &v1alpha1.TenantPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "pro", Namespace: namespace},
		Spec: v1alpha1.TenantPlanSpec{
			Tenants:           []string{"acme", "globex"},
			KeySecretSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sluice.dev/plan": "pro"}},
			Providers:         []string{"openai", "llama"},
			Priority:          v1alpha1.PriorityBatch,
			Weight:            3,
			PerUser: []v1alpha1.Limit{
				{Dimension: v1alpha1.DimensionRequests, Amount: 1000, Per: v1alpha1.PeriodDay, OnLimit: v1alpha1.BehaviorReject},
				{Dimension: v1alpha1.DimensionTokens, Amount: 20000, Per: v1alpha1.PeriodMinute, Burst: 40000},
				{Dimension: v1alpha1.DimensionOutputTokens, Amount: 4000, Per: v1alpha1.PeriodMinute, Burst: 8000},
			},
			PerTenant: []v1alpha1.Limit{
				{Dimension: v1alpha1.DimensionRequests, Amount: 1000, Per: v1alpha1.PeriodHour, OnLimit: v1alpha1.BehaviorQueue},
				{Dimension: v1alpha1.DimensionDollars, Dollars: "5.00", Per: v1alpha1.PeriodMinute},
				{Dimension: v1alpha1.DimensionInputTokens, Amount: 5000000, Per: v1alpha1.PeriodDay, OnLimit: v1alpha1.BehaviorReject},
			},
			Endpoints: []v1alpha1.EndpointLimits{
				{Endpoint: v1alpha1.EndpointChat, Limits: []v1alpha1.Limit{{Dimension: v1alpha1.DimensionRequests, Amount: 60, Per: v1alpha1.PeriodMinute}}},
				{Endpoint: v1alpha1.EndpointEmbeddings, Limits: []v1alpha1.Limit{{Dimension: v1alpha1.DimensionRequests, Amount: 600, Per: v1alpha1.PeriodMinute}}},
			},
			Budget:   &v1alpha1.Budget{Amount: "5000", Period: v1alpha1.BudgetPeriodMonth},
			TimeZone: "Europe/Berlin",
			MaxWait:  metav1.Duration{Duration: 10 * time.Minute},
			Degrade:  &v1alpha1.Degrade{Model: "gpt-4o", Fallback: "gpt-4o-mini", BelowPercent: 20},
			JobScope: v1alpha1.JobScopeUser,

			ProviderState: v1alpha1.ProviderStateNoStore,
			StoredPrompts: []string{"pmpt_68b1e0c2f3a4"},
		},
	}
}

// TestValidObjectsAreAccepted creates each kind in its smallest and fullest
// form from the Go types, and checks what the API server defaulted.
func TestValidObjectsAreAccepted(t *testing.T) {
	c := newClient(t)
	minimalQuota := &v1alpha1.ProviderQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: namespace},
		Spec: v1alpha1.ProviderQuotaSpec{
			BaseURL: "http://provider.lab:8080/v1",
			Models:  []v1alpha1.Model{{Name: "lab-model"}},
		},
	}
	minimalPlan := &v1alpha1.TenantPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: namespace},
		Spec:       v1alpha1.TenantPlanSpec{Tenants: []string{"acme"}, Providers: []string{"minimal"}},
	}
	selfHostedWithDefaults := selfHostedQuota()
	selfHostedWithDefaults.Name = "llama-defaults"
	selfHostedWithDefaults.Spec.SelfHosted.GPUsPerPod = 0
	selfHostedWithDefaults.Spec.SelfHosted.GPUQuota = nil

	tests := []struct {
		name string
		obj  client.Object
		// want is the object as the API server returns it; nil means obj
		// itself, unchanged.
		want client.Object
	}{
		{name: "hosted ProviderQuota", obj: hostedQuota()},
		{name: "Anthropic ProviderQuota", obj: func() client.Object {
			pq := hostedQuota()
			pq.Name, pq.Spec.API, pq.Spec.AnthropicVersion, pq.Spec.BaseURL = "anthropic", v1alpha1.ProviderAPIAnthropic, "2023-06-01", "https://api.anthropic.com/v1"
			pq.Spec.Azure = nil
			return pq
		}()},
		{name: "self-hosted ProviderQuota", obj: selfHostedQuota(), want: withQuotaDefaults(selfHostedQuota())},
		{name: "self-hosted ProviderQuota defaults gpusPerPod", obj: selfHostedWithDefaults, want: func() client.Object {
			want := withQuotaDefaults(selfHostedQuota())
			want.Name = "llama-defaults"
			want.Spec.SelfHosted.GPUsPerPod = 1
			want.Spec.SelfHosted.GPUQuota = nil
			return want
		}()},
		{name: "minimal ProviderQuota gets the defaults", obj: minimalQuota, want: withQuotaDefaults(minimalQuota.DeepCopy())},
		{name: "TenantPlan", obj: plan()},
		{name: "minimal TenantPlan gets the defaults", obj: minimalPlan, want: func() client.Object {
			want := minimalPlan.DeepCopy()
			want.Spec.Priority = v1alpha1.PriorityInteractive
			want.Spec.Weight = 1
			want.Spec.TimeZone = "UTC"
			want.Spec.MaxWait = metav1.Duration{Duration: time.Minute}
			want.Spec.JobScope = v1alpha1.JobScopeTenant
			want.Spec.ProviderState = v1alpha1.ProviderStateKeep
			return want
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			want := tc.want
			if want == nil {
				want = tc.obj.DeepCopyObject().(client.Object)
			}
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { c.Delete(context.Background(), tc.obj) })
			got := want.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(tc.obj), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, want, cmpopts.IgnoreTypes(metav1.TypeMeta{}, metav1.ObjectMeta{})); diff != "" {
				t.Errorf("read back (-got +want):\n%s", diff)
			}
		})
	}
}

// withQuotaDefaults sets what the API server defaults in a ProviderQuota.
func withQuotaDefaults(pq *v1alpha1.ProviderQuota) *v1alpha1.ProviderQuota {
	pq.Spec.API = v1alpha1.ProviderAPIOpenAI
	pq.Spec.AdmissionCount = v1alpha1.AdmissionCountCharacters
	pq.Spec.Batches = v1alpha1.BatchesQueue
	pq.Spec.HeadroomPercent = 100
	pq.Spec.TimeZone, pq.Spec.OutputTokenWeight = "UTC", 1
	pq.Spec.Retry = &v1alpha1.Retry{
		MaxAttempts: 3,
		BaseDelay:   metav1.Duration{Duration: 500 * time.Millisecond},
		MaxDelay:    metav1.Duration{Duration: 30 * time.Second},
	}
	pq.Spec.Timeout = metav1.Duration{Duration: time.Minute}
	pq.Spec.StallTimeout = metav1.Duration{Duration: 5 * time.Minute}
	pq.Spec.CallTimeout = metav1.Duration{Duration: 30 * time.Minute}
	pq.Spec.Breaker = &v1alpha1.Breaker{Failures: 5, OpenFor: metav1.Duration{Duration: 30 * time.Second}}
	return pq
}

// TestValidation applies a JSON merge patch, written in YAML, to a valid
// object and creates the result as a person's kubectl apply would: as plain
// JSON, so that it can hold what the Go types cannot, such as a float price.
// An empty want means the object must be accepted.
func TestValidation(t *testing.T) {
	c := newClient(t)
	tests := []struct {
		name  string
		base  client.Object
		patch string
		want  string
	}{
		// ProviderQuota: where the provider is.
		{"baseURL and selfHosted", hostedQuota(), `{spec: {selfHosted: {selector: {matchLabels: {app: vllm}}, port: 8000, engine: vllm, maxConcurrencyPerGPU: 4}}}`,
			"exactly one of baseURL and selfHosted must be set"},
		{"neither baseURL nor selfHosted", hostedQuota(), `{spec: {baseURL: null}}`,
			"exactly one of baseURL and selfHosted must be set"},
		{"baseURL not http", hostedQuota(), `{spec: {baseURL: "ftp://api.openai.com/v1"}}`,
			"baseURL must be an absolute http or https URL"},
		{"baseURL relative", hostedQuota(), `{spec: {baseURL: "api.openai.com/v1"}}`,
			"baseURL must be an absolute http or https URL"},
		{"baseURL with credentials", hostedQuota(), `{spec: {baseURL: "https://user:sk-secret@api.openai.com/v1"}}`,
			"baseURL must not hold credentials"},
		{"baseURL with query", hostedQuota(), `{spec: {baseURL: "https://api.openai.com/v1?key=sk"}}`,
			"baseURL must have no query or fragment"},
		{"metadata.name not a DNS label", hostedQuota(), `{metadata: {name: "openai.prod"}}`,
			"metadata.name must be a DNS label"},
		{"empty selector", selfHostedQuota(), `{spec: {selfHosted: {selector: {matchLabels: null}}}}`,
			"spec.selfHosted.selector: Invalid value: selector must not be empty"},
		{"unknown engine", selfHostedQuota(), `{spec: {selfHosted: {engine: ollama}}}`,
			`Unsupported value: "ollama"`},
		{"no port", selfHostedQuota(), `{spec: {selfHosted: {port: null}}}`,
			"spec.selfHosted.port: Required value"},
		{"zero gpusPerPod", selfHostedQuota(), `{spec: {selfHosted: {gpusPerPod: 0}}}`,
			"spec.selfHosted.gpusPerPod: Invalid value: 0: spec.selfHosted.gpusPerPod in body should be greater than or equal to 1"},
		{"gpuQuota below gpusPerPod", selfHostedQuota(), `{spec: {selfHosted: {gpuQuota: 1}}}`,
			"spec.selfHosted.gpuQuota: Invalid value: gpuQuota must be at least gpusPerPod"},
		{"self-hosted needs no key", selfHostedQuota(), `{spec: {apiKeySecretRef: null}}`, ""},

		// ProviderQuota: models and limits.
		{"no models", hostedQuota(), `{spec: {models: []}}`,
			"models must list at least one model"},
		{"65 models", hostedQuota(), `{spec: {models: ` + manyModels(65) + `}}`,
			"must have at most 64 items"},
		{"64 models", hostedQuota(), `{spec: {models: ` + manyModels(64) + `}}`, ""},
		{"duplicate model", hostedQuota(), `{spec: {models: [{name: gpt-4o}, {name: gpt-4o}]}}`,
			`spec.models[1]: Duplicate value: {"name":"gpt-4o"}`},
		{"unknown encoding", hostedQuota(), `{spec: {models: [{name: gpt-4o, encoding: gpt2}]}}`,
			`Unsupported value: "gpt2"`},
		{"unknown maxTokensParam", hostedQuota(), `{spec: {models: [{name: gpt-4o, maxTokensParam: max_new_tokens}]}}`,
			`spec.models[0].maxTokensParam: Unsupported value: "max_new_tokens": supported values: "max_completion_tokens", "max_tokens"`},
		{"maxTokensParam max_tokens", selfHostedQuota(), `{spec: {models: [{name: llama, maxTokensParam: max_tokens}]}}`, ""},
		{"unknown admissionCount", hostedQuota(), `{spec: {admissionCount: Bytes}}`,
			`spec.admissionCount: Unsupported value: "Bytes": supported values: "Tokenizer", "Characters"`},
		{"admissionCount Tokenizer", hostedQuota(), `{spec: {admissionCount: Tokenizer}}`, ""},
		{"negative requestsPerMinute", hostedQuota(), `{spec: {limits: {requestsPerMinute: -1}}}`,
			"should be greater than or equal to 0"},
		{"fractional tokensPerMinute", hostedQuota(), `{spec: {limits: {tokensPerMinute: 1.5}}}`,
			"must be of type integer"},
		{"limits as Anthropic and Gemini publish them", hostedQuota(),
			`{spec: {limits: {requestsPerMinute: 50, tokensPerMinute: null, inputTokensPerMinute: 30000, outputTokensPerMinute: 8000, requestsPerDay: 1000}, timeZone: America/Los_Angeles, cachedInputCounts: false}}`, ""},
		{"negative outputTokensPerMinute", hostedQuota(), `{spec: {limits: {outputTokensPerMinute: -1}}}`,
			"spec.limits.outputTokensPerMinute: Invalid value: -1: spec.limits.outputTokensPerMinute in body should be greater than or equal to 0"},
		{"fractional requestsPerDay", hostedQuota(), `{spec: {limits: {requestsPerDay: 0.5}}}`,
			"must be of type integer"},
		{"timeZone not IANA", hostedQuota(), `{spec: {timeZone: "Pacific Time"}}`,
			`spec.timeZone: Invalid value: "Pacific Time": timeZone must be an IANA time zone such as America/Los_Angeles or UTC`},
		{"timeZone Local", hostedQuota(), `{spec: {timeZone: Local}}`,
			"timeZone must be an IANA time zone"},
		{"cachedInputCounts not a boolean", hostedQuota(), `{spec: {cachedInputCounts: "no"}}`,
			"spec.cachedInputCounts: Invalid value: \"string\": spec.cachedInputCounts in body must be of type boolean"},
		{"outputTokenWeight 0", hostedQuota(), `{spec: {outputTokenWeight: 0}}`,
			"spec.outputTokenWeight: Invalid value: 0: spec.outputTokenWeight in body should be greater than or equal to 1"},
		{"outputTokenWeight 101", hostedQuota(), `{spec: {outputTokenWeight: 101}}`,
			"should be less than or equal to 100"},
		{"headroomPercent 0", hostedQuota(), `{spec: {headroomPercent: 0}}`,
			"should be greater than or equal to 1"},
		{"headroomPercent 101", hostedQuota(), `{spec: {headroomPercent: 101}}`,
			"should be less than or equal to 100"},

		// ProviderQuota: money is a decimal string.
		{"float price", hostedQuota(), `{spec: {prices: {inputPerMillion: 3.5}}}`,
			`spec.prices.inputPerMillion: Invalid value: "number": spec.prices.inputPerMillion in body must be of type string`},
		{"exponent price", hostedQuota(), `{spec: {prices: {inputPerMillion: "3.5e0"}}}`,
			`spec.prices.inputPerMillion in body should match '^[0-9]+(\.[0-9]{1,6})?$'`},
		{"negative price", hostedQuota(), `{spec: {prices: {outputPerMillion: "-1"}}}`,
			`spec.prices.outputPerMillion in body should match`},
		{"price with 7 decimals", hostedQuota(), `{spec: {prices: {outputPerMillion: "0.0000001"}}}`,
			`spec.prices.outputPerMillion in body should match`},
		{"free model", hostedQuota(), `{spec: {prices: {inputPerMillion: "0", outputPerMillion: "0.000001"}}}`, ""},
		{"float cached price", hostedQuota(), `{spec: {prices: {cachedInputPerMillion: 1.25}}}`,
			`spec.prices.cachedInputPerMillion: Invalid value: "number": spec.prices.cachedInputPerMillion in body must be of type string`},
		{"negative audio price", hostedQuota(), `{spec: {prices: {audioOutputPerMillion: "-80"}}}`,
			`spec.prices.audioOutputPerMillion in body should match`},
		{"a model's float price", hostedQuota(), `{spec: {models: [{name: gpt-4o, prices: {outputPerMillion: 15.5}}]}}`,
			`spec.models[0].prices.outputPerMillion: Invalid value: "number"`},
		{"a model's tiers", hostedQuota(), `{spec: {models: [{name: gpt-4o, prices: {inputPerMillion: "2.50", tiers: [{name: priority, inputPerMillion: "4.25"}]}}]}}`, ""},

		// ProviderQuota: service tiers.
		{"tier without a name", hostedQuota(), `{spec: {prices: {tiers: [{inputPerMillion: "5"}]}}}`,
			"spec.prices.tiers[0].name: Required value"},
		{"tier named empty", hostedQuota(), `{spec: {prices: {tiers: [{name: ""}]}}}`,
			"spec.prices.tiers[0].name: Invalid value"},
		{"tier named twice", hostedQuota(), `{spec: {prices: {tiers: [{name: flex}, {name: flex, inputPerMillion: "1"}]}}}`,
			`spec.prices.tiers[1]: Duplicate value: {"name":"flex"}`},
		{"tier named default", hostedQuota(), `{spec: {prices: {tiers: [{name: default}]}}}`,
			`spec.prices.tiers[0].name: Invalid value: "default": name must not be auto or default: those are the standard prices`},
		{"tier named auto", hostedQuota(), `{spec: {prices: {tiers: [{name: auto}]}}}`,
			"name must not be auto or default"},
		{"tier named in capitals", hostedQuota(), `{spec: {prices: {tiers: [{name: Priority}]}}}`,
			`spec.prices.tiers[0].name: Invalid value: "Priority": name must be lower-case letters, digits, '-' and '_'`},
		{"tier with a float price", hostedQuota(), `{spec: {prices: {tiers: [{name: flex, outputPerMillion: 5.5}]}}}`,
			`spec.prices.tiers[0].outputPerMillion: Invalid value: "number"`},
		{"17 tiers", hostedQuota(), `{spec: {prices: {tiers: ` + manyTiers(17) + `}}}`,
			"spec.prices.tiers: Too many: 17: must have at most 16 items"},
		{"16 tiers", hostedQuota(), `{spec: {prices: {tiers: ` + manyTiers(16) + `}}}`, ""},
		{"zero spend cap", hostedQuota(), `{spec: {spend: {perMinute: "0.00"}}}`,
			"perMinute must be more than 0; omit it for no cap"},
		{"zero monthly cap", hostedQuota(), `{spec: {spend: {perMonth: "0"}}}`,
			"perMonth must be more than 0"},

		// ProviderQuota: retry and timeout.
		{"maxDelay below baseDelay", hostedQuota(), `{spec: {retry: {baseDelay: 10s, maxDelay: 1s}}}`,
			"spec.retry.maxDelay: Invalid value: maxDelay must be at least baseDelay"},
		{"maxDelay below the default baseDelay", hostedQuota(), `{spec: {retry: {baseDelay: null, maxDelay: 100ms}}}`,
			"maxDelay must be at least baseDelay"},
		{"maxDelay equal to baseDelay", hostedQuota(), `{spec: {retry: {baseDelay: 2s, maxDelay: 2s}}}`, ""},
		{"11 attempts", hostedQuota(), `{spec: {retry: {maxAttempts: 11}}}`,
			"should be less than or equal to 10"},
		{"zero baseDelay", hostedQuota(), `{spec: {retry: {baseDelay: 0s}}}`,
			"baseDelay must be a positive duration"},
		{"zero timeout", hostedQuota(), `{spec: {timeout: 0s}}`,
			"timeout must be a positive duration"},
		{"timeout not a duration", hostedQuota(), `{spec: {timeout: soon}}`,
			"timeout must be a positive duration"},
		{"zero stallTimeout", hostedQuota(), `{spec: {stallTimeout: 0s}}`,
			"stallTimeout must be a positive duration"},
		{"callTimeout below timeout", hostedQuota(), `{spec: {timeout: 2m, callTimeout: 90s}}`,
			"spec.callTimeout: Invalid value: callTimeout must be at least timeout"},
		{"callTimeout below the default timeout", hostedQuota(), `{spec: {callTimeout: 30s}}`,
			"callTimeout must be at least timeout"},
		{"key Secret without a name", hostedQuota(), `{spec: {apiKeySecretRef: {name: null}}}`,
			"spec.apiKeySecretRef.name: Required value"},
		{"azure", hostedQuota(), `{spec: {azure: {apiVersion: 2025-04-01-preview, deployments: {gpt-4o: prod-gpt-4o}}}}`, ""},
		{"azure without an apiVersion", hostedQuota(), `{spec: {azure: {}}}`,
			"spec.azure.apiVersion: Required value"},
		{"azure apiVersion not a version", hostedQuota(), `{spec: {azure: {apiVersion: latest}}}`,
			"apiVersion must be an api-version such as 2024-10-21"},
		{"azure deployment of another model", hostedQuota(), `{spec: {azure: {apiVersion: 2024-10-21, deployments: {gpt-5: d}}}}`,
			"spec.azure.deployments: Invalid value: azure.deployments must map only models of this ProviderQuota"},
		{"azure deployment not a name", hostedQuota(), `{spec: {azure: {apiVersion: 2024-10-21, deployments: {gpt-4o: a/b}}}}`,
			`spec.azure.deployments.gpt-4o: Invalid value: "a/b": spec.azure.deployments.gpt-4o in body should match`},
		{"azure on Pods", selfHostedQuota(), `{spec: {azure: {apiVersion: 2024-10-21}}}`,
			"azure must not be set with selfHosted"},
		{"api not an API", hostedQuota(), `{spec: {api: gemini}}`,
			`spec.api: Unsupported value: "gemini"`},
		{"azure with api anthropic", hostedQuota(), `{spec: {api: anthropic, azure: {apiVersion: 2024-10-21}}}`,
			"azure must not be set with api anthropic"},
		{"anthropicVersion with api openai", hostedQuota(), `{spec: {anthropicVersion: 2023-06-01}}`,
			"anthropicVersion must be set only with api anthropic"},
		{"anthropicVersion not a version", hostedQuota(), `{spec: {api: anthropic, anthropicVersion: latest}}`,
			"anthropicVersion must be an anthropic-version such as 2023-06-01"},
		{"batches on a batch service of an Anthropic account", hostedQuota(), `{spec: {api: anthropic, batches: Service}}`,
			"batches must be Queue unless the provider is an OpenAI account"},
		{"batches on a batch service of an Azure resource", hostedQuota(), `{spec: {azure: {apiVersion: 2024-10-21}, batches: Service}}`,
			"batches must be Queue unless the provider is an OpenAI account"},
		{"batches on the batch service of an OpenAI account", hostedQuota(), `{spec: {batches: Service, batchQueueTokens: 2000000}}`, ""},
		{"batches on a batch service of a self-hosted provider", selfHostedQuota(), `{spec: {batches: Service}}`,
			"batches must be Queue for a self-hosted provider"},
		{"batches not a way", hostedQuota(), `{spec: {batches: Later}}`,
			`spec.batches: Unsupported value: "Later"`},
		{"batchQueueTokens without a batch service", hostedQuota(), `{spec: {batchQueueTokens: 1000}}`,
			"batchQueueTokens must be set only with batches Service"},
		{"breaker of no failures", hostedQuota(), `{spec: {breaker: {failures: 0}}}`,
			"spec.breaker.failures: Invalid value: 0: spec.breaker.failures in body should be greater than or equal to 1"},
		{"breaker open for no time", hostedQuota(), `{spec: {breaker: {openFor: 0s}}}`,
			"openFor must be a positive duration"},

		// TenantPlan: who and where.
		{"no tenants", plan(), `{spec: {tenants: []}}`,
			"tenants must name at least one tenant"},
		{"tenant not a DNS label", plan(), `{spec: {tenants: [Acme Corp]}}`,
			"should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"},
		{"duplicate tenant", plan(), `{spec: {tenants: [acme, acme]}}`,
			`Duplicate value: "acme"`},
		{"no providers", plan(), `{spec: {providers: []}}`,
			"providers must name at least one ProviderQuota"},
		{"providers absent", plan(), `{spec: {providers: null}}`,
			"spec.providers: Required value"},
		{"unknown priority", plan(), `{spec: {priority: Urgent}}`,
			`Unsupported value: "Urgent"`},
		{"unknown jobScope", plan(), `{spec: {jobScope: Everyone}}`,
			`Unsupported value: "Everyone"`},
		{"unknown providerState", plan(), `{spec: {providerState: Forget}}`,
			`Unsupported value: "Forget"`},
		{"a stored prompt that is not a prompt's id", plan(), `{spec: {storedPrompts: [pmpt_1, resp_2]}}`,
			"each stored prompt must be a prompt's id: pmpt_ followed by letters and digits"},
		{"weight 0", plan(), `{spec: {weight: 0}}`,
			"should be greater than or equal to 1"},
		{"weight 1001", plan(), `{spec: {weight: 1001}}`,
			"should be less than or equal to 1000"},

		// TenantPlan: limits.
		{"burst 0", plan(), `{spec: {perUser: [{dimension: tokens, amount: 100, per: minute, burst: 0}]}}`,
			"burst must be at least 1; omit it to mean the amount"},
		{"burst on a calendar window", plan(), `{spec: {perUser: [{dimension: requests, amount: 50, per: day, burst: 10}]}}`,
			"spec.perUser[0].burst: Invalid value: burst must be omitted on a calendar window (day or month), for dollars and for inFlight"},
		{"burst on dollars", plan(), `{spec: {perTenant: [{dimension: dollars, dollars: "1", per: minute, burst: 10}]}}`,
			"burst must be omitted on a calendar window (day or month), for dollars and for inFlight"},
		{"dollars limit with amount", plan(), `{spec: {perTenant: [{dimension: dollars, dollars: "1", amount: 1, per: minute}]}}`,
			"a dollars limit must set dollars and not amount"},
		{"dollars limit without dollars", plan(), `{spec: {perTenant: [{dimension: dollars, amount: 1, per: minute}]}}`,
			"a dollars limit must set dollars and not amount"},
		{"requests limit with dollars", plan(), `{spec: {perUser: [{dimension: requests, dollars: "1", per: minute}]}}`,
			"a requests, tokens, inputTokens, outputTokens or inFlight limit must set amount and not dollars"},
		{"tokens limit without amount", plan(), `{spec: {perUser: [{dimension: tokens, per: minute}]}}`,
			"a requests, tokens, inputTokens, outputTokens or inFlight limit must set amount and not dollars"},
		{"requests limit without a period", plan(), `{spec: {perUser: [{dimension: requests, amount: 50}]}}`,
			"spec.perUser[0].per: Invalid value: per must be set for requests, tokens, inputTokens, outputTokens and dollars"},
		{"input and output tokens at every level, every period", plan(),
			`{spec: {perUser: [{dimension: inputTokens, amount: 100, per: second, burst: 200}, {dimension: outputTokens, amount: 1000, per: day}], perTenant: [{dimension: outputTokens, amount: 5000, per: hour, onLimit: Reject}, {dimension: inputTokens, amount: 9000000, per: month}], endpoints: [{endpoint: chat, limits: [{dimension: outputTokens, amount: 60000, per: minute}]}]}}`, ""},
		{"outputTokens with dollars", plan(), `{spec: {perTenant: [{dimension: outputTokens, dollars: "1", per: minute}]}}`,
			"a requests, tokens, inputTokens, outputTokens or inFlight limit must set amount and not dollars"},
		{"inputTokens without a period", plan(), `{spec: {perUser: [{dimension: inputTokens, amount: 50}]}}`,
			"spec.perUser[0].per: Invalid value: per must be set for requests, tokens, inputTokens, outputTokens and dollars"},
		{"burst on a day of output tokens", plan(), `{spec: {perUser: [{dimension: outputTokens, amount: 50, per: day, burst: 10}]}}`,
			"spec.perUser[0].burst: Invalid value: burst must be omitted on a calendar window (day or month), for dollars and for inFlight"},
		{"unknown dimension", plan(), `{spec: {perUser: [{dimension: cachedTokens, amount: 50, per: day}]}}`,
			`spec.perUser[0].dimension: Unsupported value: "cachedTokens": supported values: "requests", "tokens", "inputTokens", "outputTokens", "dollars", "inFlight"`},
		{"inFlight per user, per tenant and per endpoint", plan(),
			`{spec: {perUser: [{dimension: inFlight, amount: 2}], perTenant: [{dimension: inFlight, amount: 5, onLimit: Reject}], endpoints: [{endpoint: chat, limits: [{dimension: inFlight, amount: 3, onLimit: Queue}]}]}}`, ""},
		{"inFlight with a period", plan(), `{spec: {perTenant: [{dimension: inFlight, amount: 5, per: minute}]}}`,
			"spec.perTenant[0].per: Invalid value: per must be omitted for inFlight, which counts calls at once, not per period"},
		{"inFlight with a burst", plan(), `{spec: {perUser: [{dimension: inFlight, amount: 2, burst: 4}]}}`,
			"spec.perUser[0].burst: Invalid value: burst must be omitted on a calendar window (day or month), for dollars and for inFlight"},
		{"inFlight with dollars", plan(), `{spec: {perTenant: [{dimension: inFlight, dollars: "5"}]}}`,
			"a requests, tokens, inputTokens, outputTokens or inFlight limit must set amount and not dollars"},
		{"inFlight without an amount", plan(), `{spec: {endpoints: [{endpoint: chat, limits: [{dimension: inFlight}]}]}}`,
			"spec.endpoints[0].limits[0]: Invalid value: a requests, tokens, inputTokens, outputTokens or inFlight limit must set amount and not dollars"},
		{"inFlight of no calls", plan(), `{spec: {perTenant: [{dimension: inFlight, amount: 0}]}}`,
			"should be greater than or equal to 1"},
		{"zero amount", plan(), `{spec: {perUser: [{dimension: requests, amount: 0, per: minute}]}}`,
			"should be greater than or equal to 1"},
		{"zero dollars", plan(), `{spec: {perTenant: [{dimension: dollars, dollars: "0.0", per: hour}]}}`,
			"dollars must be more than 0"},
		{"float dollars", plan(), `{spec: {perTenant: [{dimension: dollars, dollars: 1.5, per: hour}]}}`,
			"must be of type string"},
		{"Queue on a day", plan(), `{spec: {perUser: [{dimension: requests, amount: 50, per: day, onLimit: Queue}]}}`,
			"onLimit must be Reject on a calendar window (day or month)"},
		{"Queue on a month, on an endpoint", plan(), `{spec: {endpoints: [{endpoint: chat, limits: [{dimension: tokens, amount: 5000000, per: month, onLimit: Queue}]}]}}`,
			"spec.endpoints[0].limits[0].onLimit: Invalid value: onLimit must be Reject on a calendar window (day or month)"},
		{"Queue on an hour", plan(), `{spec: {perUser: [{dimension: requests, amount: 50, per: hour, onLimit: Queue}]}}`, ""},
		{"unknown period", plan(), `{spec: {perUser: [{dimension: requests, amount: 50, per: week}]}}`,
			`Unsupported value: "week"`},
		{"unknown endpoint", plan(), `{spec: {endpoints: [{endpoint: images, limits: [{dimension: requests, amount: 1, per: second}]}]}}`,
			`Unsupported value: "images"`},
		{"duplicate endpoint", plan(), `{spec: {endpoints: [{endpoint: chat, limits: [{dimension: requests, amount: 1, per: second}]}, {endpoint: chat, limits: [{dimension: requests, amount: 2, per: second}]}]}}`,
			"Duplicate value"},
		{"endpoint without limits", plan(), `{spec: {endpoints: [{endpoint: chat, limits: []}]}}`,
			"limits must hold at least one limit"},

		// TenantPlan: budget, time and degrade.
		{"budget per minute", plan(), `{spec: {budget: {period: minute}}}`,
			`spec.budget.period: Unsupported value: "minute": supported values: "day", "month"`},
		{"budget per Month", plan(), `{spec: {budget: {period: Month}}}`,
			`Unsupported value: "Month"`},
		{"budget per day", plan(), `{spec: {budget: {period: day}}}`, ""},
		{"zero budget", plan(), `{spec: {budget: {amount: "0"}}}`,
			"amount must be more than 0"},
		{"budget as a number", plan(), `{spec: {budget: {amount: 5000}}}`,
			"spec.budget.amount in body must be of type string"},
		{"maxWait 0s", plan(), `{spec: {maxWait: 0s}}`,
			"maxWait must be a duration more than 0s and at most 10m"},
		{"maxWait negative", plan(), `{spec: {maxWait: -1s}}`,
			"maxWait must be a duration more than 0s and at most 10m"},
		{"maxWait 11m", plan(), `{spec: {maxWait: 11m}}`,
			"maxWait must be a duration more than 0s and at most 10m"},
		{"maxWait 1h", plan(), `{spec: {maxWait: 1h}}`,
			"maxWait must be a duration more than 0s and at most 10m"},
		{"maxWait 1m30s", plan(), `{spec: {maxWait: 1m30s}}`, ""},
		{"Local time zone", plan(), `{spec: {timeZone: Local}}`,
			"timeZone must be an IANA time zone"},
		{"time zone offset", plan(), `{spec: {timeZone: "+02:00"}}`,
			"timeZone must be an IANA time zone"},
		{"degrade to the same model", plan(), `{spec: {degrade: {fallback: gpt-4o}}}`,
			"spec.degrade.fallback: Invalid value: fallback must differ from model"},
		{"degrade without budget", plan(), `{spec: {budget: null}}`,
			"spec.budget: Invalid value: budget must be set when degrade is"},
		{"degrade below 100 percent", plan(), `{spec: {degrade: {belowPercent: 100}}}`,
			"should be less than or equal to 99"},
		{"no budget and no degrade", plan(), `{spec: {budget: null, degrade: null}}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := patched(t, c, tc.base, tc.patch)
			err := c.Create(context.Background(), obj)
			if err == nil {
				t.Cleanup(func() { c.Delete(context.Background(), obj) })
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("create: %v; want it accepted", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("create succeeded; want it refused with %q", tc.want)
			case !apierrors.IsInvalid(err):
				t.Fatalf("create: %v; want Invalid with %q", err, tc.want)
			case !strings.Contains(err.Error(), tc.want):
				t.Fatalf("create: %v\nwant the message to contain %q", err, tc.want)
			}
		})
	}
}

// patched returns base with a JSON merge patch, written in YAML, applied.
func patched(t *testing.T, c client.Client, base client.Object, patchYAML string) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(base, c.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON([]byte(patchYAML))
	if err != nil {
		t.Fatalf("patch %s: %v", patchYAML, err)
	}
	if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
		t.Fatalf("patch %s: %v", patchYAML, err)
	}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(doc, &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetGroupVersionKind(gvk)
	return obj
}

// manyModels returns a YAML list of n distinct models.
func manyModels(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("{name: model-%d}", i)
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// manyTiers returns a YAML list of n distinct service tiers, each with its prices.
func manyTiers(n int) string {
	tiers := make([]string, n)
	for i := range tiers {
		tiers[i] = fmt.Sprintf(`{name: tier-%d, inputPerMillion: "%d", outputPerMillion: "%d"}`, i, i, 2*i)
	}
	return "[" + strings.Join(tiers, ", ") + "]"
}

// TestCRDs reads the installed CRDs back from the API server.
func TestCRDs(t *testing.T) {
	c := newClient(t)
	tests := []struct {
		crd       string
		shortName string
		columns   []string
	}{
		{"providerquotas.sluice.dev", "pq",
			[]string{"RPM", "RPM-Used", "TPM", "TPM-Used", "ITPM", "OTPM", "RPD", "In-Flight", "Max-In-Flight", "Queued", "Engine", "Pods", "GPUs", "Ready", "Reason", "Active", "Age"}},
		{"tenantplans.sluice.dev", "tp",
			[]string{"Tenants", "Priority", "Budget", "Period", "Spent", "Resets", "Ready", "Reason", "Age"}},
	}
	for _, tc := range tests {
		t.Run(tc.crd, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: tc.crd}, crd); err != nil {
				t.Fatal(err)
			}
			if got := crd.Spec.Scope; got != apiextensionsv1.NamespaceScoped {
				t.Errorf("scope = %s; want %s", got, apiextensionsv1.NamespaceScoped)
			}
			if diff := cmp.Diff(crd.Spec.Names.ShortNames, []string{tc.shortName}); diff != "" {
				t.Errorf("short names (-got +want):\n%s", diff)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("%d versions; want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Error("no status subresource")
			}
			var got []string
			for _, col := range v.AdditionalPrinterColumns {
				got = append(got, col.Name)
			}
			if diff := cmp.Diff(got, tc.columns); diff != "" {
				t.Errorf("printer columns (-got +want):\n%s", diff)
			}
		})
	}
}

// TestPrinterColumns writes a status and reads the object back as the table
// kubectl get -o wide prints, to check that each column finds its value.
func TestPrinterColumns(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	resets := metav1.NewTime(time.Date(2031, 7, 1, 0, 0, 0, 0, time.UTC))

	pq := selfHostedQuota()
	pq.Name = "columns"
	create(t, c, pq)
	pq.Status = v1alpha1.ProviderQuotaStatus{
		ObservedGeneration: pq.Generation,
		EffectiveLimits: &v1alpha1.ProviderLimits{RequestsPerMinute: 1425, TokensPerMinute: 285000, MaxInFlight: 64,
			InputTokensPerMinute: 190000, OutputTokensPerMinute: 38000, RequestsPerDay: 95000},
		Usage: &v1alpha1.ProviderUsage{
			RequestsLastMinute: 1200, TokensLastMinute: 250000, InFlight: 60, Queued: 7, Throttles: 1,
			Refused:        []v1alpha1.RefusedCount{{Reason: "provider_tokens", Count: 3}},
			SpendThisMonth: "12.345",
		},
		ReadyPods: ptr.To[int32](2), ReadyGPUs: ptr.To[int32](4),
		LastUsageTime: &resets,
	}
	meta.SetStatusCondition(&pq.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCompiled, Message: "in the gateways' configuration"})
	meta.SetStatusCondition(&pq.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPodsReady, Message: "2 Pods ready with 4 GPUs"})
	if err := c.Status().Update(ctx, pq); err != nil {
		t.Fatalf("update status: %v", err)
	}

	tp := plan()
	tp.Name = "columns"
	create(t, c, tp)
	tp.Status = v1alpha1.TenantPlanStatus{
		ObservedGeneration: tp.Generation,
		TenantCount:        ptr.To[int32](1),
		SpentThisPeriod:    "4200.50",
		BudgetRemaining:    "799.50",
		ResetsAt:           &resets,
		Queued:             3,
		Tenants: []v1alpha1.TenantStatus{
			{Name: "acme", Keys: 2, SpentThisPeriod: "4200.50", BudgetRemaining: "799.50", Queued: 3},
			{Name: "globex", Keys: 0},
		},
	}
	meta.SetStatusCondition(&tp.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonKeySecretMissing, Message: "tenant globex has no key Secret"})
	if err := c.Status().Update(ctx, tp); err != nil {
		t.Fatalf("update status: %v", err)
	}

	tests := []struct {
		resource string
		want     []string
	}{
		{"providerquotas", []string{"columns", "1425", "1200", "285000", "250000", "190000", "38000", "95000", "60", "64", "7", "vllm", "2", "4", "True", "Compiled", "True", "0s"}},
		{"tenantplans", []string{"columns", "1", "Batch", "5000", "month", "4200.50", "2031-07-01T00:00:00Z", "False", "KeySecretMissing", "0s"}},
	}
	for _, tc := range tests {
		t.Run(tc.resource, func(t *testing.T) {
			got := tableRow(t, tc.resource, "columns")
			got[len(got)-1] = "0s" // Age: the object is seconds old
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("kubectl get -o wide (-got +want):\n%s", diff)
			}
		})
	}
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), obj) })
}

// tableRow returns the cells of one object as the API server prints it for
// kubectl get.
func tableRow(t *testing.T, resource, name string) []string {
	t.Helper()
	cfg := startAPIServer(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/apis/sluice.dev/v1alpha1/namespaces/%s/%s/%s", strings.TrimSuffix(cfg.Host, "/"), namespace, resource, name)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s %v", url, resp.Status, body, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows; want 1", len(table.Rows))
	}
	var cells []string
	for _, cell := range table.Rows[0].Cells {
		if cell == nil {
			cell = ""
		}
		cells = append(cells, fmt.Sprint(cell))
	}
	return cells
}
