package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderQuota is one provider account and the models it serves: where the
// gateways call it, the limits and prices that apply to it, and, in status,
// what the gateways use of it now. The operator compiles every ProviderQuota
// into a provider of the gateway configuration, named after the object.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=pq,categories=sluice
// +kubebuilder:printcolumn:name="RPM",type=integer,JSONPath=`.status.effectiveLimits.requestsPerMinute`,description="Requests per minute the gateways allow now; empty means unlimited."
// +kubebuilder:printcolumn:name="RPM-Used",type=integer,JSONPath=`.status.usage.requestsLastMinute`,description="Requests sent in the last minute."
// +kubebuilder:printcolumn:name="TPM",type=integer,JSONPath=`.status.effectiveLimits.tokensPerMinute`,description="Tokens per minute the gateways allow now; empty means unlimited."
// +kubebuilder:printcolumn:name="TPM-Used",type=integer,JSONPath=`.status.usage.tokensLastMinute`,description="Tokens charged in the last minute."
// +kubebuilder:printcolumn:name="ITPM",type=integer,JSONPath=`.status.effectiveLimits.inputTokensPerMinute`,priority=1,description="Input tokens per minute the gateways allow now; empty means unlimited."
// +kubebuilder:printcolumn:name="OTPM",type=integer,JSONPath=`.status.effectiveLimits.outputTokensPerMinute`,priority=1,description="Output tokens per minute the gateways allow now; empty means unlimited."
// +kubebuilder:printcolumn:name="RPD",type=integer,JSONPath=`.status.effectiveLimits.requestsPerDay`,priority=1,description="Requests per day the gateways allow; empty means unlimited."
// +kubebuilder:printcolumn:name="In-Flight",type=integer,JSONPath=`.status.usage.inFlight`,description="Calls waiting for the provider's answer now."
// +kubebuilder:printcolumn:name="Max-In-Flight",type=integer,JSONPath=`.status.effectiveLimits.maxInFlight`,priority=1,description="Concurrent calls the gateways allow now; empty means unlimited."
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.usage.queued`,description="Requests waiting in the gateways now."
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.spec.selfHosted.engine`,description="A self-hosted provider's inference server; empty for a hosted one."
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.readyPods`,description="A self-hosted provider's ready Pods."
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.readyGPUs`,description="The GPUs of a self-hosted provider's ready Pods."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`,priority=1,description="For a self-hosted provider: whether a selected Pod is ready."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (lower-case letters, digits and '-', at most 63 characters): it names the provider in the gateway configuration"
type ProviderQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the provider account, its models, limits and prices.
	// +required
	Spec ProviderQuotaSpec `json:"spec"`
	// status is the provider's readiness, effective limits and live usage,
	// written by the operator.
	// +optional
	Status ProviderQuotaStatus `json:"status,omitempty"`
}

// ProviderQuotaSpec is one provider account: hosted at a URL, or served by
// inference Pods in the cluster.
//
// +kubebuilder:validation:XValidation:rule="has(self.baseURL) != has(self.selfHosted)",message="exactly one of baseURL and selfHosted must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.azure) || !has(self.api) || self.api == 'openai'",message="azure must not be set with api anthropic: Azure serves the OpenAI API",fieldPath=".azure"
// +kubebuilder:validation:XValidation:rule="!has(self.anthropicVersion) || (has(self.api) && self.api == 'anthropic')",message="anthropicVersion must be set only with api anthropic",fieldPath=".anthropicVersion"
// +kubebuilder:validation:XValidation:rule="!has(self.azure) || !has(self.selfHosted)",message="azure must not be set with selfHosted: an Azure OpenAI resource is hosted at baseURL",fieldPath=".azure"
// +kubebuilder:validation:XValidation:rule="!has(self.batches) || self.batches != 'Service' || !has(self.selfHosted)",message="batches must be Queue for a self-hosted provider: it has no batch service",fieldPath=".batches"
// +kubebuilder:validation:XValidation:rule="!has(self.batches) || self.batches != 'Service' || ((!has(self.api) || self.api == 'openai') && !has(self.azure))",message="batches must be Queue unless the provider is an OpenAI account: the gateways call OpenAI's Batch API",fieldPath=".batches"
// +kubebuilder:validation:XValidation:rule="!has(self.batchQueueTokens) || (has(self.batches) && self.batches == 'Service')",message="batchQueueTokens must be set only with batches Service",fieldPath=".batchQueueTokens"
// +kubebuilder:validation:XValidation:rule="!has(self.azure) || !has(self.azure.deployments) || self.azure.deployments.all(m, self.models.exists(x, x.name == m))",message="azure.deployments must map only models of this ProviderQuota",fieldPath=".azure.deployments"
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || !has(self.callTimeout) || !self.timeout.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || !self.callTimeout.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.callTimeout) >= duration(self.timeout)",message="callTimeout must be at least timeout",fieldPath=".callTimeout"
type ProviderQuotaSpec struct {
	// api is the API the provider speaks: openai (OpenAI's, and every server
	// that copies it) or anthropic (Anthropic's Messages API, called with
	// the key in x-api-key and an anthropic-version header). Clients call a
	// model in its provider's API: the gateways translate neither to the
	// other, and every provider of a model's pool speaks one API. Defaults
	// to openai.
	// +optional
	// +kubebuilder:default=openai
	API ProviderAPI `json:"api,omitempty"`
	// anthropicVersion is the anthropic-version header a call to an
	// Anthropic provider carries when its client sent none, such as
	// 2023-06-01. Only with api anthropic; absent means 2023-06-01.
	// +optional
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}$')",message="anthropicVersion must be an anthropic-version such as 2023-06-01"
	AnthropicVersion string `json:"anthropicVersion,omitempty"`
	// baseURL is the absolute http or https URL of a hosted provider, to
	// which the API's paths are appended, such as https://api.openai.com/v1
	// or https://api.anthropic.com/v1.
	// It holds no credentials, query or fragment; the key comes from
	// apiKeySecretRef. Exactly one of baseURL and selfHosted is set.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="baseURL must be an absolute http or https URL, such as https://api.openai.com/v1"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@')",message="baseURL must not hold credentials: reference the key with apiKeySecretRef"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="baseURL must have no query or fragment"
	BaseURL string `json:"baseURL,omitempty"`
	// selfHosted describes inference Pods in this namespace that serve the
	// models. Exactly one of baseURL and selfHosted is set.
	// +optional
	SelfHosted *SelfHosted `json:"selfHosted,omitempty"`
	// models are the models this provider serves, 1 to 64, each name unique
	// here. A model that several ProviderQuotas serve is served by their
	// pool: each call goes to the one that can take it soonest within its own
	// limits, and a provider whose breaker is open leaves the pool for a
	// while. The pool's entries of a model must agree on its aliases,
	// encoding and defaultMaxTokens; prices and limits may differ.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) >= 1",message="models must list at least one model"
	Models []Model `json:"models"`
	// limits are the provider's published limits, counted as the provider
	// counts them. A minute is any sixty seconds: the gateways count a
	// rolling minute and pace calls over it. A day runs from midnight in
	// timeZone; a call past a day's limit waits when the day ends within its
	// plan's maxWait, and is otherwise refused 429 with Retry-After until
	// then. Tokens count as cachedInputCounts and outputTokenWeight say.
	// headroomPercent applies to each. Absent means unlimited.
	// +optional
	Limits *ProviderLimits `json:"limits,omitempty"`
	// timeZone is the IANA time zone in which the provider's day begins,
	// for its limits per day, such as America/Los_Angeles, where Gemini's
	// requests per day reset. Defaults to UTC.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self != 'Local' && self.matches('^[A-Za-z][-+_A-Za-z0-9]*(/[-+_A-Za-z0-9]+)*$')",message="timeZone must be an IANA time zone such as America/Los_Angeles or UTC"
	TimeZone string `json:"timeZone,omitempty"`
	// cachedInputCounts says whether the prompt tokens a call reads from the
	// provider's cache count toward its limits on tokens and input tokens:
	// true, as OpenAI counts them, or false, as Anthropic's current models
	// leave cache reads out of their input tokens per minute. The gateways
	// admit a call on its whole prompt and, with false, give back what it
	// read from the cache when it ends. Absent means true with api openai
	// and false with api anthropic.
	// +optional
	CachedInputCounts *bool `json:"cachedInputCounts,omitempty"`
	// outputTokenWeight is how many times each output token counts toward
	// the provider's limits on tokens and output tokens, 1 to 100: 5 for a
	// Bedrock model that counts its output five times. Plans count each
	// token once. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	OutputTokenWeight int32 `json:"outputTokenWeight,omitempty"`
	// admissionCount is how the provider counts a call against its tokens
	// per minute: Characters, about four characters a token and the
	// completion's cap when it admits the call, as OpenAI documents it does,
	// or Tokenizer, the call's usage by the model's encoding. With
	// Characters the gateways take ceil(UTF-8 bytes / 4) and the cap from
	// limits.tokensPerMinute, and keep it there for the minute after the
	// call (its usage, when that is more), as the provider does; every
	// other limit counts the encoding's estimate and settles to the usage.
	// Defaults to Characters.
	// +optional
	// +kubebuilder:default=Characters
	AdmissionCount AdmissionCount `json:"admissionCount,omitempty"`
	// batches says how the batches of OpenAI's Batch API for this provider's
	// models run: Queue, each line as a job in the gateways' own queue, in
	// the capacity interactive calls leave; or Service, on the provider's own
	// batch service (an OpenAI account's), at half its prices, its batch
	// prices. Defaults to Queue.
	// +optional
	// +kubebuilder:default=Queue
	Batches BatchWay `json:"batches,omitempty"`
	// batchQueueTokens is the provider's enqueued token limit: the most
	// tokens (each line's prompt and cap) its batch service holds enqueued
	// for a model. A batch that would pass it waits in the gateways until
	// batches before it end. Only with batches Service; unset means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BatchQueueTokens int64 `json:"batchQueueTokens,omitempty"`
	// headroomPercent is the share of the published limits the gateways use,
	// 1 to 100: 95 keeps 5% spare for other clients of the same account and
	// for estimates that settle higher. Defaults to 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	HeadroomPercent int32 `json:"headroomPercent,omitempty"`
	// prices are what the provider charges, in dollars per million tokens of
	// each class, for calls to a model without prices of its own. Absent
	// means free, which leaves spend ceilings and budgets nothing to count.
	// +optional
	Prices *Prices `json:"prices,omitempty"`
	// spend caps what calls to this provider may cost. Absent means no cap.
	// +optional
	Spend *Spend `json:"spend,omitempty"`
	// retry says how calls that failed with 429, 5xx or a connection error
	// are retried. Defaults to 3 attempts with backoff from 500ms to 30s.
	// +optional
	// +kubebuilder:default={}
	Retry *Retry `json:"retry,omitempty"`
	// timeout bounds how long each attempt waits for the provider's answer
	// to begin (its headers), such as 60s or 2m. Defaults to 60s.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="timeout must be a positive duration such as 60s or 2m"
	Timeout metav1.Duration `json:"timeout,omitzero"`
	// stallTimeout bounds how long an answer that has begun may go without
	// a byte from the provider. Past it the call ends: a stream with an error
	// event, any other answer with 504. Defaults to 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="stallTimeout must be a positive duration such as 5m"
	StallTimeout metav1.Duration `json:"stallTimeout,omitzero"`
	// callTimeout bounds a call from when it is sent to the end of its
	// answer, every attempt and a whole stream included. It must be at least
	// timeout. Defaults to 30m.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="callTimeout must be a positive duration such as 30m"
	CallTimeout metav1.Duration `json:"callTimeout,omitzero"`
	// azure makes the provider an Azure OpenAI resource at baseURL (such as
	// https://myresource.openai.azure.com): each model's calls go to its
	// deployment, with the api-version given and the key in an api-key
	// header. Absent means the OpenAI API at baseURL.
	// +optional
	Azure *Azure `json:"azure,omitempty"`
	// breaker takes the provider out of its models' pools while its calls
	// keep failing. Defaults to 5 failures in a row and 30s out.
	// +optional
	// +kubebuilder:default={}
	Breaker *Breaker `json:"breaker,omitempty"`
	// apiKeySecretRef names the Secret, in this namespace, that holds the
	// provider's API key. The Secret must be labelled sluice.dev/provider
	// with this ProviderQuota's name, so that no ProviderQuota can send
	// another Secret's value to its baseURL. The operator copies the key into
	// the gateways' configuration Secret; it never appears in a status, log
	// or event. Absent means the provider needs no key, as a self-hosted one
	// may not.
	// +optional
	APIKeySecretRef *SecretKeyRef `json:"apiKeySecretRef,omitempty"`
}

// Engine names the inference server that self-hosted Pods run. It tells the
// metrics adapter which of the Pods' own metrics count waiting and running
// requests, and is authoritative over what their names suggest.
//
// +kubebuilder:validation:Enum=vllm;tgi;sglang;triton;llamacpp
type Engine string

// The inference engines.
const (
	EngineVLLM     Engine = "vllm"
	EngineTGI      Engine = "tgi"
	EngineSGLang   Engine = "sglang"
	EngineTriton   Engine = "triton"
	EngineLlamaCpp Engine = "llamacpp"
)

// SelfHosted describes the inference Pods that serve a self-hosted
// provider. The gateways cap calls in flight at ready Pods × gpusPerPod ×
// maxConcurrencyPerGPU, so the excess waits in the gateways, where it is
// counted and can drive an autoscaler.
//
// +kubebuilder:validation:XValidation:rule="(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="selector must not be empty: an empty selector selects every Pod in the namespace",fieldPath=".selector"
// +kubebuilder:validation:XValidation:rule="!has(self.gpuQuota) || !has(self.gpusPerPod) || self.gpuQuota >= self.gpusPerPod",message="gpuQuota must be at least gpusPerPod: one Pod needs gpusPerPod GPUs",fieldPath=".gpuQuota"
type SelfHosted struct {
	// selector selects the inference Pods in this namespace. It must not be
	// empty. The gateways call the ready ones at their own addresses, each
	// call to the least busy Pod; no Service is needed.
	// +required
	Selector metav1.LabelSelector `json:"selector"`
	// port is the Pods' port that serves the OpenAI-compatible API and
	// /metrics, 1 to 65535.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// engine is the inference server the Pods run: vllm (also under Ray
	// Serve), tgi, sglang, triton (with any backend) or llamacpp. The metrics
	// adapter reads the Pods' metrics by this engine's rules and never
	// guesses another engine from the names it finds; a Pod that names tgi
	// and serves none of TGI's gauges, which TGI creates on its first
	// request, counts as idle.
	// +required
	Engine Engine `json:"engine"`
	// gpusPerPod is the number of GPUs each Pod holds, at least 1. Defaults
	// to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	GPUsPerPod int32 `json:"gpusPerPod,omitempty"`
	// maxConcurrencyPerGPU is the most requests one GPU serves at once, at
	// least 1; past it latency grows without throughput. The gateways send
	// each Pod at most gpusPerPod × maxConcurrencyPerGPU calls at once and
	// hold the rest in their queue.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxConcurrencyPerGPU int32 `json:"maxConcurrencyPerGPU"`
	// gpuQuota is the most GPUs the Pods may hold together, at least
	// gpusPerPod; an autoscaler's maxReplicas is gpuQuota / gpusPerPod.
	// Absent means no quota.
	// +optional
	// +kubebuilder:validation:Minimum=1
	GPUQuota *int32 `json:"gpuQuota,omitempty"`
}

// Encoding names the tiktoken encoding that counts a model's prompt tokens.
//
// +kubebuilder:validation:Enum=cl100k_base;o200k_base;p50k_base;r50k_base
type Encoding string

// The encodings.
const (
	EncodingCL100kBase Encoding = "cl100k_base"
	EncodingO200kBase  Encoding = "o200k_base"
	EncodingP50kBase   Encoding = "p50k_base"
	EncodingR50kBase   Encoding = "r50k_base"
)

// ProviderAPI names the API a provider speaks: openai or anthropic.
//
// +kubebuilder:validation:Enum=openai;anthropic
type ProviderAPI string

// The APIs a provider may speak.
const (
	ProviderAPIOpenAI    ProviderAPI = "openai"
	ProviderAPIAnthropic ProviderAPI = "anthropic"
)

// BatchWay is how a provider's batches run: Queue (in the gateways' queue)
// or Service (on the provider's batch service).
//
// +kubebuilder:validation:Enum=Queue;Service
type BatchWay string

// The ways a batch runs.
const (
	BatchesQueue   BatchWay = "Queue"
	BatchesService BatchWay = "Service"
)

// AdmissionCount is how a provider counts a call's prompt against its tokens
// per minute when it admits the call: Tokenizer (the model's encoding) or
// Characters (about four characters a token).
//
// +kubebuilder:validation:Enum=Tokenizer;Characters
type AdmissionCount string

// The admission counts.
const (
	AdmissionCountTokenizer  AdmissionCount = "Tokenizer"
	AdmissionCountCharacters AdmissionCount = "Characters"
)

// MaxTokensParam names the request field that caps a chat completion:
// max_completion_tokens (OpenAI) or max_tokens (older models, and inference
// servers such as TGI).
//
// +kubebuilder:validation:Enum=max_completion_tokens;max_tokens
type MaxTokensParam string

// The fields that cap a chat completion.
const (
	MaxTokensParamCompletion MaxTokensParam = "max_completion_tokens"
	MaxTokensParamTokens     MaxTokensParam = "max_tokens"
)

// Model is one model a provider serves.
type Model struct {
	// name is the model as clients name it in requests, such as gpt-4o-mini.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// aliases are other names clients use for this model, each unique
	// across every ProviderQuota's models and aliases. A request for an
	// alias goes upstream under name. A dated snapshot (name-YYYY-MM-DD) is
	// a model of its own, priced as its provider prices it: list it to serve
	// it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Aliases []string `json:"aliases,omitempty"`
	// encoding is the tiktoken encoding that counts the model's prompt
	// tokens: cl100k_base, o200k_base, p50k_base or r50k_base. Absent means
	// the gateways estimate with their documented proxy, about four
	// characters a token.
	// +optional
	Encoding Encoding `json:"encoding,omitempty"`
	// defaultMaxTokens is the completion, in tokens, the gateways expect
	// when a request sets no max_tokens, at least 1. Absent means 256.
	// +optional
	// +kubebuilder:validation:Minimum=1
	DefaultMaxTokens int64 `json:"defaultMaxTokens,omitempty"`
	// maxTokensParam is the field in which the gateways send a chat call's
	// cap, the client's own (moved there from the other field) or
	// defaultMaxTokens when it set none, so that the provider writes no more
	// than the gateways estimated: max_completion_tokens (OpenAI's field, which its
	// reasoning models and current chat models require) or max_tokens
	// (older models, and inference servers such as TGI). A call to
	// /v1/completions gets max_tokens, that endpoint's only field. Absent
	// means max_tokens for a selfHosted provider and max_completion_tokens
	// for one at a baseURL.
	// +optional
	MaxTokensParam MaxTokensParam `json:"maxTokensParam,omitempty"`
	// contextWindow is the most tokens, input and output together, one call
	// to the model holds, at least 1: what a background response the
	// gateways cannot follow to its end is charged as input. Absent means
	// 1048576.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// prices, when set, are what calls to this model cost in place of the
	// ProviderQuota's prices, whole: a dated snapshot listed as a model of its
	// own (gpt-4o-2024-05-13 beside gpt-4o) has its own prices. Absent means
	// the ProviderQuota's prices.
	// +optional
	Prices *Prices `json:"prices,omitempty"`
}

// ProviderLimits are limits on calls to one provider, per rolling minute or
// per day in the provider's time zone. Zero or absent means unlimited.
type ProviderLimits struct {
	// requestsPerMinute caps requests per minute. Zero or absent means
	// unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// tokensPerMinute caps prompt plus completion tokens per minute, the
	// completion at its cap until the call ends. Zero or absent means
	// unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TokensPerMinute int64 `json:"tokensPerMinute,omitempty"`
	// inputTokensPerMinute caps prompt tokens per minute, as Anthropic's
	// input tokens per minute do. Zero or absent means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InputTokensPerMinute int64 `json:"inputTokensPerMinute,omitempty"`
	// outputTokensPerMinute caps completion tokens per minute, as
	// Anthropic's output tokens per minute do: a call takes its cap
	// (max_tokens) when it starts, and gives back what it did not write
	// when it ends. Zero or absent means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OutputTokensPerMinute int64 `json:"outputTokensPerMinute,omitempty"`
	// requestsPerDay caps requests per day, as Gemini's requests per day
	// do. Zero or absent means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RequestsPerDay int64 `json:"requestsPerDay,omitempty"`
	// tokensPerDay caps prompt plus completion tokens per day. Zero or
	// absent means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TokensPerDay int64 `json:"tokensPerDay,omitempty"`
	// inputTokensPerDay caps prompt tokens per day. Zero or absent means
	// unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InputTokensPerDay int64 `json:"inputTokensPerDay,omitempty"`
	// outputTokensPerDay caps completion tokens per day. Zero or absent
	// means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OutputTokensPerDay int64 `json:"outputTokensPerDay,omitempty"`
	// maxInFlight caps concurrent calls. Zero or absent means unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxInFlight int64 `json:"maxInFlight,omitempty"`
}

// Prices are what a provider charges, in dollars per million tokens of each
// class of token it bills, each a decimal string such as "2.50". A prompt
// token is cached input, a cache write, audio input or else input; a
// completion token is audio output or else output, reasoning included. The
// gateways read each class from the provider's usage (OpenAI's
// prompt_tokens_details and completion_tokens_details) and price it at its
// own price.
type Prices struct {
	// inputPerMillion is the price of a million prompt tokens of no other
	// class (text and images read afresh), in dollars, a decimal string such
	// as "2.50". Absent means free.
	// +optional
	InputPerMillion Money `json:"inputPerMillion,omitempty"`
	// cachedInputPerMillion is the price of a million prompt tokens the
	// provider read from its cache (OpenAI's cached_tokens), such as "1.25".
	// Absent means inputPerMillion: no discount is assumed.
	// +optional
	CachedInputPerMillion Money `json:"cachedInputPerMillion,omitempty"`
	// cacheWritePerMillion is the price of a million prompt tokens the
	// provider wrote to its cache, which Anthropic bills apart; OpenAI reports
	// none. Absent means inputPerMillion.
	// +optional
	CacheWritePerMillion Money `json:"cacheWritePerMillion,omitempty"`
	// audioInputPerMillion is the price of a million prompt tokens of audio
	// (OpenAI's prompt_tokens_details.audio_tokens), such as "40". Absent means
	// inputPerMillion.
	// +optional
	AudioInputPerMillion Money `json:"audioInputPerMillion,omitempty"`
	// outputPerMillion is the price of a million completion tokens of text,
	// reasoning tokens included, in dollars, a decimal string such as "10".
	// Absent means free.
	// +optional
	OutputPerMillion Money `json:"outputPerMillion,omitempty"`
	// audioOutputPerMillion is the price of a million completion tokens of
	// audio (OpenAI's completion_tokens_details.audio_tokens), such as "80".
	// Absent means outputPerMillion.
	// +optional
	AudioOutputPerMillion Money `json:"audioOutputPerMillion,omitempty"`
	// tiers are the prices of the provider's service tiers, at most 16, each
	// named as its answers name it in service_tier: priority, at about twice
	// the prices above, or flex, at about half. A call is priced at the tier
	// its answer reports, else at the one its request asked for; at the
	// prices above when that is auto, default, none, or a tier not listed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Tiers []TierPrices `json:"tiers,omitempty"`
}

// TierPrices are one service tier's prices, in dollars per million tokens of
// each class as in prices. An absent input or output price is the standard
// one, and an absent class price the tier's own input or output price.
type TierPrices struct {
	// name is the tier as the provider's answers name it in service_tier,
	// such as priority or flex: unique among the tiers, lower-case letters,
	// digits, '-' and '_', and neither auto nor default, which name the
	// standard prices.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][-_a-z0-9]*$')",message="name must be lower-case letters, digits, '-' and '_', as the provider's answers name the tier in service_tier"
	// +kubebuilder:validation:XValidation:rule="self != 'auto' && self != 'default'",message="name must not be auto or default: those are the standard prices, set outside tiers"
	Name string `json:"name"`
	// inputPerMillion is the tier's price of a million prompt tokens of no
	// other class. Absent means the standard inputPerMillion.
	// +optional
	InputPerMillion Money `json:"inputPerMillion,omitempty"`
	// cachedInputPerMillion is the tier's price of a million cached prompt
	// tokens. Absent means the tier's inputPerMillion.
	// +optional
	CachedInputPerMillion Money `json:"cachedInputPerMillion,omitempty"`
	// cacheWritePerMillion is the tier's price of a million prompt tokens
	// written to the cache. Absent means the tier's inputPerMillion.
	// +optional
	CacheWritePerMillion Money `json:"cacheWritePerMillion,omitempty"`
	// audioInputPerMillion is the tier's price of a million prompt tokens of
	// audio. Absent means the tier's inputPerMillion.
	// +optional
	AudioInputPerMillion Money `json:"audioInputPerMillion,omitempty"`
	// outputPerMillion is the tier's price of a million completion tokens of
	// text. Absent means the standard outputPerMillion.
	// +optional
	OutputPerMillion Money `json:"outputPerMillion,omitempty"`
	// audioOutputPerMillion is the tier's price of a million completion
	// tokens of audio. Absent means the tier's outputPerMillion.
	// +optional
	AudioOutputPerMillion Money `json:"audioOutputPerMillion,omitempty"`
}

// Spend caps what calls to one provider may cost, at its prices, over all
// tenants.
type Spend struct {
	// perMinute caps spend per minute in dollars, a decimal string such as
	// "0.50", more than 0; calls wait in the queue past it. Absent means no
	// cap.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="perMinute must be more than 0; omit it for no cap"
	PerMinute Money `json:"perMinute,omitempty"`
	// perMonth caps spend per calendar month (UTC) in dollars, a decimal
	// string such as "5000", more than 0; calls are refused past it until
	// the month ends. Absent means no cap.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="perMonth must be more than 0; omit it for no cap"
	PerMonth Money `json:"perMonth,omitempty"`
}

// Retry says how calls that failed with 429, 5xx or a connection error are
// retried: exponential backoff with full jitter between baseDelay and
// maxDelay, unless the provider's retry-after says otherwise. 400, 401, 403
// and 404 are never retried.
//
// +kubebuilder:validation:XValidation:rule="!has(self.baseDelay) || !has(self.maxDelay) || duration(self.maxDelay) >= duration(self.baseDelay)",message="maxDelay must be at least baseDelay",fieldPath=".maxDelay"
type Retry struct {
	// maxAttempts counts the first call too, 1 to 10; 1 means no retry.
	// Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// baseDelay is the first backoff ceiling, such as 500ms. Defaults to
	// 500ms.
	// +optional
	// +kubebuilder:default="500ms"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="baseDelay must be a positive duration such as 500ms"
	BaseDelay metav1.Duration `json:"baseDelay,omitzero"`
	// maxDelay caps the backoff ceiling, at least baseDelay, such as 30s.
	// Defaults to 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="maxDelay must be a positive duration such as 30s"
	MaxDelay metav1.Duration `json:"maxDelay,omitzero"`
}

// Azure is where an Azure OpenAI provider serves its models.
type Azure struct {
	// apiVersion is the api-version every call carries, such as 2024-10-21
	// or 2025-04-01-preview.
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$')",message="apiVersion must be an api-version such as 2024-10-21 or 2025-04-01-preview"
	APIVersion string `json:"apiVersion"`
	// deployments maps a model's name to the deployment that serves it, at
	// most 64. A model not in it is served by the deployment of its own
	// name.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Deployments map[string]AzureDeployment `json:"deployments,omitempty"`
}

// AzureDeployment is the name of an Azure OpenAI deployment: letters, digits,
// '.', '_' and '-', at most 64.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
type AzureDeployment string

// Breaker is a provider's circuit breaker. Attempts that fail in a row (a
// connection refused, reset or timed out, an answer of 5xx other than 503)
// open it: the provider leaves the pools of its models, and their calls go to
// the other providers of each, for openFor. Then one call probes it: served,
// the provider is back; failed, it stays out for another openFor. A 429 or
// 503 does not count: it pauses the provider instead. Each gateway keeps its
// own breaker.
type Breaker struct {
	// failures is how many attempts in a row must fail to open the breaker,
	// 1 to 100. Defaults to 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Failures int32 `json:"failures,omitempty"`
	// openFor is how long the breaker stays open before it lets a probe
	// through, such as 30s. Defaults to 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="openFor must be a positive duration such as 30s"
	OpenFor metav1.Duration `json:"openFor,omitzero"`
}

// SecretKeyRef names one item of a Secret in the referring object's
// namespace.
type SecretKeyRef struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the item of the Secret's data that holds the value. Defaults to
	// apiKey.
	// +optional
	// +kubebuilder:default=apiKey
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// ProviderQuotaStatus is what the operator last saw of a provider.
type ProviderQuotaStatus struct {
	// conditions hold the Ready condition: True when the provider is in the
	// configuration the gateways load, else False with a reason (see the
	// Reason constants) and a message that says what to fix. A self-hosted
	// provider has Active too: True while a selected Pod is ready, False
	// while none is and the gateways hold its calls (ScaledToZero when it
	// selects no Pod, NoReadyPods when those it selects are not ready). While
	// the operator polls the gateways, UsageReported says whether every
	// gateway answered the latest poll, and LimitsBelowSpec whether the
	// provider reports lower limits than spec.limits.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// effectiveLimits are the limits the gateways enforce now: the published
	// limits × headroomPercent / 100, where those per minute are those of
	// learnedLimits when it holds them; while
	// the provider answers 429 or 503, maxInFlight is the sum of the caps the
	// gateways it throttles keep (each halves its cap at every throttle,
	// starting from the calls it had in flight when limits.maxInFlight is
	// unset, and grows it back at every success, lifting it once whole); and
	// for a self-hosted provider maxInFlight = readyGPUs ×
	// maxConcurrencyPerGPU (no more than limits.maxInFlight). Zero or absent
	// means unlimited, but for a self-hosted provider with no ready Pod: the
	// gateways then hold its calls in their queue, and Active is False with
	// reason ScaledToZero or NoReadyPods.
	// +optional
	EffectiveLimits *ProviderLimits `json:"effectiveLimits,omitempty"`
	// learnedLimits are the limits the provider reports, in OpenAI's
	// x-ratelimit-limit-requests and -tokens headers or Anthropic's
	// anthropic-ratelimit-requests-, -input-tokens- and
	// -output-tokens-limit, where they are lower than spec.limits: the
	// lowest any gateway read in its last report. The gateways pace to them
	// in place of the spec's, and LimitsBelowSpec is True. Absent means no
	// gateway read a lower one; only limits per minute are ever set.
	// +optional
	LearnedLimits *ProviderLimits `json:"learnedLimits,omitempty"`
	// usage is the provider's recent usage, summed over every gateway's last
	// report. Absent means no gateway has reported yet.
	// +optional
	Usage *ProviderUsage `json:"usage,omitempty"`
	// readyPods counts the self-hosted Pods that are ready. Absent for a
	// hosted provider.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyPods *int32 `json:"readyPods,omitempty"`
	// readyGPUs counts the GPUs of the ready self-hosted Pods: readyPods ×
	// gpusPerPod, no more than gpuQuota. Absent for a hosted provider.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyGPUs *int32 `json:"readyGPUs,omitempty"`
	// lastUsageTime is when the oldest of the gateways' reports in usage was
	// taken. Absent means no gateway has reported yet.
	// +optional
	LastUsageTime *metav1.Time `json:"lastUsageTime,omitempty"`
	// recordedSpendThisMonth is what the operator's durable record holds of
	// the spend against spec.spend.perMonth this calendar month (UTC), in
	// dollars: what the gateways put back into a store that comes back empty
	// or from an older snapshot. Absent without spec.spend.perMonth, or
	// while the record holds nothing of the provider.
	// +optional
	RecordedSpendThisMonth Money `json:"recordedSpendThisMonth,omitempty"`
	// recordedToday is what the operator's durable record holds of the
	// provider's limits per day today, in its timeZone: each window by name
	// (provider:requests:day, provider:inputTokens:day, ...), what it used
	// and when it resets. The gateways share these windows, and put back
	// what the record holds into a store that comes back empty. Absent
	// without a limit per day, or while the record holds none of today's.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	RecordedToday []RecordedWindow `json:"recordedToday,omitempty"`
}

// ProviderUsage is one provider's recent usage, summed over the gateways.
type ProviderUsage struct {
	// requestsLastMinute counts requests sent to the provider in the last
	// minute.
	// +required
	// +kubebuilder:validation:Minimum=0
	RequestsLastMinute int64 `json:"requestsLastMinute"`
	// tokensLastMinute counts tokens charged in the last minute, as the
	// provider counts them (see cachedInputCounts and outputTokenWeight).
	// +required
	// +kubebuilder:validation:Minimum=0
	TokensLastMinute int64 `json:"tokensLastMinute"`
	// inputTokensLastMinute counts input tokens charged in the last minute,
	// as the provider counts them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InputTokensLastMinute int64 `json:"inputTokensLastMinute,omitempty"`
	// outputTokensLastMinute counts output tokens charged in the last
	// minute, as the provider counts them: a running call's cap, a finished
	// call's completion.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OutputTokensLastMinute int64 `json:"outputTokensLastMinute,omitempty"`
	// inFlight counts calls waiting for the provider's answer now.
	// +required
	// +kubebuilder:validation:Minimum=0
	InFlight int64 `json:"inFlight"`
	// queued counts requests waiting in the gateways now.
	// +required
	// +kubebuilder:validation:Minimum=0
	Queued int64 `json:"queued"`
	// queuedTokens is the estimated tokens of the requests waiting in the
	// gateways now.
	// +optional
	// +kubebuilder:validation:Minimum=0
	QueuedTokens int64 `json:"queuedTokens,omitempty"`
	// refused counts requests the gateways refused, by reason, since each
	// gateway started. Absent means none.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	Refused []RefusedCount `json:"refused,omitempty"`
	// throttles counts the provider's 429 and 503 answers since each gateway
	// started.
	// +required
	// +kubebuilder:validation:Minimum=0
	Throttles int64 `json:"throttles"`
	// spendThisMonth is what calls cost this calendar month (UTC), in
	// dollars.
	// +optional
	SpendThisMonth Money `json:"spendThisMonth,omitempty"`
	// batchesQueued counts the batches of the provider's models waiting to
	// run: on its batch service, for room in its enqueued tokens. Absent
	// means none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BatchesQueued int64 `json:"batchesQueued,omitempty"`
	// batchesRunning counts the batches of the provider's models running, in
	// the gateways' queue or on its batch service. Absent means none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BatchesRunning int64 `json:"batchesRunning,omitempty"`
	// breakersOpen counts the gateways whose breaker holds the provider out
	// of its models' pools now: open, or half open and letting one probe
	// through. Absent means none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BreakersOpen int32 `json:"breakersOpen,omitempty"`
	// breakerOpens counts the times a gateway's breaker opened since each
	// gateway started.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BreakerOpens int64 `json:"breakerOpens,omitempty"`
}

// ProviderQuotaList is a list of ProviderQuota.
//
// +kubebuilder:object:root=true
type ProviderQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ProviderQuotas.
	Items []ProviderQuota `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProviderQuota{}, &ProviderQuotaList{})
}
