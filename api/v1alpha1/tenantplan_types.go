package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels and data item that make a Secret a tenant's API key (see
// TenantPlanSpec.KeySecretSelector), and the label that lets a ProviderQuota
// use a Secret as its provider's key.
const (
	// LabelTenant on a key Secret names the tenant the key belongs to.
	LabelTenant = "sluice.dev/tenant"
	// LabelUser on a key Secret names the person or service the key belongs
	// to; perUser limits count per user. A Secret without it belongs to a
	// user named after the Secret.
	LabelUser = "sluice.dev/user"
	// KeySecretItem is the item of a key Secret's data that holds the key.
	KeySecretItem = "apiKey"
	// LabelProvider on a provider's key Secret names the ProviderQuota that
	// may use it (see ProviderQuotaSpec.APIKeySecretRef).
	LabelProvider = "sluice.dev/provider"
)

// TenantPlan is a plan some tenants share: the providers they may use, their
// place in the queue, their limits and their budget. Each tenant gets the
// plan's limits and budget for itself; the plan is a template, not a pool.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=tp,categories=sluice
// +kubebuilder:printcolumn:name="Tenants",type=integer,JSONPath=`.status.tenantCount`,description="Tenants in the gateways' configuration, with at least one key."
// +kubebuilder:printcolumn:name="Priority",type=string,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Budget",type=string,JSONPath=`.spec.budget.amount`,description="Each tenant's budget per period, in dollars."
// +kubebuilder:printcolumn:name="Period",type=string,JSONPath=`.spec.budget.period`,priority=1
// +kubebuilder:printcolumn:name="Spent",type=string,JSONPath=`.status.spentThisPeriod`,description="The most one tenant spent this period, in dollars."
// +kubebuilder:printcolumn:name="Resets",type=string,JSONPath=`.status.resetsAt`,description="When the budget's period ends."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TenantPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the plan: its tenants, providers, limits and budget.
	// +required
	Spec TenantPlanSpec `json:"spec"`
	// status is the plan's readiness, spend and queue, written by the
	// operator.
	// +optional
	Status TenantPlanStatus `json:"status,omitempty"`
}

// TenantPlanSpec is a plan: who it covers and what they may do.
//
// +kubebuilder:validation:XValidation:rule="!has(self.degrade) || has(self.budget)",message="budget must be set when degrade is: degrade acts when the budget runs low",fieldPath=".budget"
type TenantPlanSpec struct {
	// tenants name the customers this plan covers, 1 to 100 unique names,
	// each a DNS label (lower-case letters, digits and '-', at most 63
	// characters). A tenant belongs to at most one plan.
	//
	// A tenant's API keys are the Secrets in this namespace labelled
	// sluice.dev/tenant=<tenant> (and matching keySecretSelector, when set),
	// each holding one key in its apiKey item. Label a Secret
	// sluice.dev/user=<user> to say whose key it is; without the label the
	// user is the Secret's name.
	// +required
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="size(self) >= 1",message="tenants must name at least one tenant"
	Tenants []string `json:"tenants"`
	// keySecretSelector narrows which Secrets hold the tenants' keys: a key
	// Secret must match it as well as carry the sluice.dev/tenant label.
	// Use it to keep keys apart that the same namespace holds for other
	// purposes. Absent means the sluice.dev/tenant label alone decides.
	// The gateways only ever see a key's SHA-256.
	// +optional
	KeySecretSelector *metav1.LabelSelector `json:"keySecretSelector,omitempty"`
	// providers name the ProviderQuotas in this namespace the tenants may
	// use, 1 to 16 unique names; a request's model picks one of them.
	// +required
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="size(self) >= 1",message="providers must name at least one ProviderQuota"
	Providers []string `json:"providers"`
	// priority is the tenants' class in the queue: Interactive lanes are
	// served first; Batch lanes get what they leave, and a small guaranteed
	// share. Defaults to Interactive.
	// +optional
	// +kubebuilder:default=Interactive
	Priority Priority `json:"priority,omitempty"`
	// weight is each tenant's share within its priority class, 1 to 1000: a
	// tenant of weight 2 is served twice the tokens of one of weight 1 when
	// both wait. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Weight int32 `json:"weight,omitempty"`
	// perUser limits apply to each user of each tenant separately, counting
	// calls to every provider of the plan together, at most 16. Absent means
	// none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	PerUser []Limit `json:"perUser,omitempty"`
	// perTenant limits apply to all the users of one tenant together,
	// counting calls to every provider of the plan together, at most 16.
	// Absent means none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	PerTenant []Limit `json:"perTenant,omitempty"`
	// endpoints hold limits for one endpoint each, over all the users of one
	// tenant and every provider of the plan; each endpoint appears once.
	// Absent means none.
	// +optional
	// +listType=map
	// +listMapKey=endpoint
	// +kubebuilder:validation:MaxItems=3
	Endpoints []EndpointLimits `json:"endpoints,omitempty"`
	// budget caps each tenant's spend per calendar day or month, one budget
	// spent by calls to every provider of the plan, refusing requests past it
	// until the period ends. Absent means no budget.
	// +optional
	Budget *Budget `json:"budget,omitempty"`
	// timeZone is the IANA time zone in which the tenants' calendar windows
	// (day and month limits, the budget) reset, such as Europe/Berlin.
	// Defaults to UTC.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self != 'Local' && self.matches('^[A-Za-z][-+_A-Za-z0-9]*(/[-+_A-Za-z0-9]+)*$')",message="timeZone must be an IANA time zone such as Europe/Berlin or UTC"
	TimeZone string `json:"timeZone,omitempty"`
	// maxWait is the longest a request may expect to wait in the queue,
	// more than 0s and at most 10m; past it the gateways answer busy at
	// once, before anything is spent. Defaults to 60s.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('10m')",message="maxWait must be a duration more than 0s and at most 10m, such as 60s"
	MaxWait metav1.Duration `json:"maxWait,omitzero"`
	// degrade sends requests for an expensive model to a cheaper one when a
	// tenant's budget runs low. It requires a budget. Absent means never.
	// +optional
	Degrade *Degrade `json:"degrade,omitempty"`
	// jobScope is who may read, list and cancel a tenant's jobs: Tenant,
	// every user of the tenant, or User, only the user whose key sent the
	// job. Defaults to Tenant.
	// +optional
	// +kubebuilder:default=Tenant
	JobScope JobScope `json:"jobScope,omitempty"`
	// providerState is what the tenants' calls may leave at the provider:
	// Keep, the responses it stores and runs in the background, each id
	// the tenant's own; NoStore, every Responses call sent with "store":
	// false and background runs and continued responses refused; or
	// Refuse, every call that does not say "store": false refused.
	// Defaults to Keep.
	// +optional
	// +kubebuilder:default=Keep
	ProviderState ProviderState `json:"providerState,omitempty"`
	// storedPrompts are the ids of prompts stored at the provider (pmpt_…,
	// made in its dashboard) that the tenants' Responses calls may name;
	// any other is refused.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=133
	// +kubebuilder:validation:XValidation:rule="self.all(id, id.matches('^pmpt_[A-Za-z0-9]+$'))",message="each stored prompt must be a prompt's id: pmpt_ followed by letters and digits"
	StoredPrompts []string `json:"storedPrompts,omitempty"`
}

// ProviderState is what a tenant's calls may leave at the provider.
//
// +kubebuilder:validation:Enum=Keep;NoStore;Refuse
type ProviderState string

// The provider states.
const (
	// ProviderStateKeep lets the provider keep what the calls ask it to.
	ProviderStateKeep ProviderState = "Keep"
	// ProviderStateNoStore sends Responses calls with "store": false.
	ProviderStateNoStore ProviderState = "NoStore"
	// ProviderStateRefuse refuses calls that do not say "store": false.
	ProviderStateRefuse ProviderState = "Refuse"
)

// JobScope is who may read, list and cancel a tenant's jobs.
//
// +kubebuilder:validation:Enum=Tenant;User
type JobScope string

// The job scopes.
const (
	// JobScopeTenant lets every user of a tenant see all its jobs.
	JobScopeTenant JobScope = "Tenant"
	// JobScopeUser lets each user see only the jobs its own keys sent.
	JobScopeUser JobScope = "User"
)

// Priority is a tenant's class in the queue.
//
// +kubebuilder:validation:Enum=Interactive;Batch
type Priority string

// The priority classes.
const (
	// PriorityInteractive lanes are served first.
	PriorityInteractive Priority = "Interactive"
	// PriorityBatch lanes get what interactive lanes leave, and a small
	// guaranteed share.
	PriorityBatch Priority = "Batch"
)

// Endpoint names an OpenAI-compatible endpoint.
//
// +kubebuilder:validation:Enum=chat;completions;embeddings;responses;moderations
type Endpoint string

// The endpoints a plan's limits can name.
const (
	// EndpointChat is /v1/chat/completions.
	EndpointChat Endpoint = "chat"
	// EndpointCompletions is /v1/completions.
	EndpointCompletions Endpoint = "completions"
	// EndpointEmbeddings is /v1/embeddings.
	EndpointEmbeddings Endpoint = "embeddings"
	// EndpointResponses is /v1/responses.
	EndpointResponses Endpoint = "responses"
	// EndpointModerations is /v1/moderations.
	EndpointModerations Endpoint = "moderations"
)

// EndpointLimits are limits on one endpoint.
type EndpointLimits struct {
	// endpoint is chat (/v1/chat/completions), completions (/v1/completions),
	// embeddings (/v1/embeddings), responses (/v1/responses) or moderations
	// (/v1/moderations).
	// +required
	Endpoint Endpoint `json:"endpoint"`
	// limits apply to the endpoint, 1 to 16.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) >= 1",message="limits must hold at least one limit"
	Limits []Limit `json:"limits"`
}

// Dimension is what a limit counts.
//
// +kubebuilder:validation:Enum=requests;tokens;inputTokens;outputTokens;dollars;inFlight
type Dimension string

// The dimensions.
const (
	// DimensionRequests counts requests.
	DimensionRequests Dimension = "requests"
	// DimensionTokens counts prompt plus expected completion tokens, settled
	// from the provider's usage.
	DimensionTokens Dimension = "tokens"
	// DimensionInputTokens counts prompt tokens, settled from the
	// provider's usage.
	DimensionInputTokens Dimension = "inputTokens"
	// DimensionOutputTokens counts completion tokens: the completion's cap
	// when a call starts, settled from the provider's usage as it ends.
	DimensionOutputTokens Dimension = "outputTokens"
	// DimensionDollars counts spend at the provider's prices.
	DimensionDollars Dimension = "dollars"
	// DimensionInFlight counts calls at once, over every gateway: a call
	// holds a slot from when it is let go until its answer ends.
	DimensionInFlight Dimension = "inFlight"
)

// Period is the span a limit's amount covers. Second, minute and hour are
// token-bucket rates; day and month are calendar windows that reset at
// midnight in the plan's time zone.
//
// +kubebuilder:validation:Enum=second;minute;hour;day;month
type Period string

// The periods.
const (
	PeriodSecond Period = "second"
	PeriodMinute Period = "minute"
	PeriodHour   Period = "hour"
	PeriodDay    Period = "day"
	PeriodMonth  Period = "month"
)

// Behavior is what the gateways do with a request over a limit.
//
// +kubebuilder:validation:Enum=Reject;Queue
type Behavior string

// The behaviors at a limit.
const (
	// BehaviorReject answers 429 at once, with Retry-After.
	BehaviorReject Behavior = "Reject"
	// BehaviorQueue holds the request until every budget allows it, or
	// answers busy at once when the expected wait passes maxWait.
	BehaviorQueue Behavior = "Queue"
)

// Limit is one limit on one dimension: an amount of requests or tokens, or
// of dollars, per period; or a number of calls at once (inFlight).
//
// +kubebuilder:validation:XValidation:rule="self.dimension != 'dollars' || (has(self.dollars) && !has(self.amount))",message="a dollars limit must set dollars and not amount"
// +kubebuilder:validation:XValidation:rule="self.dimension == 'dollars' || (has(self.amount) && !has(self.dollars))",message="a requests, tokens, inputTokens, outputTokens or inFlight limit must set amount and not dollars"
// +kubebuilder:validation:XValidation:rule="self.dimension == 'inFlight' || has(self.per)",message="per must be set for requests, tokens, inputTokens, outputTokens and dollars",fieldPath=".per"
// +kubebuilder:validation:XValidation:rule="self.dimension != 'inFlight' || !has(self.per)",message="per must be omitted for inFlight, which counts calls at once, not per period",fieldPath=".per"
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || (has(self.per) && self.per in ['second', 'minute', 'hour'] && self.dimension in ['requests', 'tokens', 'inputTokens', 'outputTokens'])",message="burst must be omitted on a calendar window (day or month), for dollars and for inFlight",fieldPath=".burst"
// +kubebuilder:validation:XValidation:rule="!has(self.onLimit) || self.onLimit != 'Queue' || !has(self.per) || !(self.per in ['day', 'month'])",message="onLimit must be Reject on a calendar window (day or month): waiting until midnight is not a queue",fieldPath=".onLimit"
type Limit struct {
	// dimension is what the limit counts: requests, tokens (prompt plus
	// expected completion, settled from the provider's usage), inputTokens
	// (the prompt, settled from the usage), outputTokens (the completion's
	// cap when a call starts, settled from the usage as it ends), dollars,
	// or inFlight, the calls of the user, tenant or endpoint running at once
	// over every gateway. A plan counts every token once, whatever its
	// provider's own limits count.
	// +required
	Dimension Dimension `json:"dimension"`
	// amount is the number of requests or tokens per period, or of calls
	// at once for inFlight, at least 1. Set for every dimension but
	// dollars.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Amount int64 `json:"amount,omitempty"`
	// dollars is the spend per period in dollars, a decimal string such as
	// "5.00", more than 0. Set for dollars only.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="dollars must be more than 0"
	Dollars Money `json:"dollars,omitempty"`
	// per is the period: second, minute or hour for a token-bucket rate, or
	// day or month for a calendar window. Required for requests, tokens and
	// dollars; omit it for inFlight.
	// +optional
	Per Period `json:"per,omitempty"`
	// burst is a rate's bucket capacity, at least 1, in the amount's unit:
	// how much may go at once after a quiet spell. Absent means the amount.
	// Omit it on calendar windows, for dollars and for inFlight.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="burst must be at least 1; omit it to mean the amount"
	Burst int64 `json:"burst,omitempty"`
	// onLimit is what happens to a request over the limit: Reject answers
	// 429 at once; Queue waits until the limit allows, up to the plan's
	// maxWait (for inFlight, until a call it counts ends). Absent means
	// Queue for a rate and for inFlight, and Reject for a calendar window,
	// on which Queue is not allowed.
	// +optional
	OnLimit Behavior `json:"onLimit,omitempty"`
}

// Budget caps a tenant's spend per calendar day or month. It acts as a
// dollars limit on a calendar window with onLimit Reject.
type Budget struct {
	// amount is the spend allowed per period in dollars, a decimal string
	// such as "5000", more than 0.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="amount must be more than 0"
	Amount Money `json:"amount"`
	// period is day or month: the budget resets at midnight, or at midnight
	// on the first of the month, in the plan's time zone.
	// +required
	Period BudgetPeriod `json:"period"`
}

// BudgetPeriod is a budget's calendar window: day or month.
//
// +kubebuilder:validation:Enum=day;month
type BudgetPeriod string

// The budget periods.
const (
	BudgetPeriodDay   BudgetPeriod = "day"
	BudgetPeriodMonth BudgetPeriod = "month"
)

// Degrade sends requests for an expensive model to a cheaper one when a
// tenant's budget runs low; the response says so in a header.
//
// +kubebuilder:validation:XValidation:rule="self.model != self.fallback",message="fallback must differ from model",fieldPath=".fallback"
type Degrade struct {
	// model is the expensive model, served by one of the plan's providers.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model"`
	// fallback is the model requests go to instead, served by one of the
	// plan's providers.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Fallback string `json:"fallback"`
	// belowPercent is the share of the budget left, 1 to 99, below which
	// requests for model go to fallback.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	BelowPercent int32 `json:"belowPercent"`
}

// TenantPlanStatus is what the operator last saw of a plan. The summary
// fields answer "is any tenant near its budget?"; tenants has the detail.
type TenantPlanStatus struct {
	// conditions hold the Ready condition: True when every tenant is in the
	// configuration the gateways load, else False with a reason (see the
	// Reason constants) and a message that says what to fix. While the
	// operator polls the gateways, UsageReported says whether every gateway
	// answered the latest poll.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// tenantCount counts the plan's tenants in the gateways' configuration:
	// those with at least one key Secret. Fewer than spec.tenants means some
	// have no key yet; the Ready condition names them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TenantCount *int32 `json:"tenantCount,omitempty"`
	// spentThisPeriod is the most one tenant spent in the current period, in
	// dollars: the budget's day or month, or the calendar month when there
	// is no budget.
	// +optional
	SpentThisPeriod Money `json:"spentThisPeriod,omitempty"`
	// budgetRemaining is the least one tenant has left of its budget this
	// period, in dollars. Absent means no budget.
	// +optional
	BudgetRemaining Money `json:"budgetRemaining,omitempty"`
	// resetsAt is when the current period ends. Absent means no budget.
	// +optional
	ResetsAt *metav1.Time `json:"resetsAt,omitempty"`
	// queued counts the tenants' requests waiting in the gateways now.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Queued int64 `json:"queued,omitempty"`
	// refused counts the tenants' requests the gateways refused, by reason,
	// since each gateway started. Absent means none.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	Refused []RefusedCount `json:"refused,omitempty"`
	// tenants hold each tenant's keys, spend and queue.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Tenants []TenantStatus `json:"tenants,omitempty"`
}

// TenantStatus is what the operator last saw of one tenant of a plan.
type TenantStatus struct {
	// name is the tenant's name from spec.tenants.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// keys counts the tenant's key Secrets; with none, the tenant's requests
	// are refused as unauthenticated.
	// +required
	// +kubebuilder:validation:Minimum=0
	Keys int32 `json:"keys"`
	// spentThisPeriod is what the tenant spent in the current period, in
	// dollars.
	// +optional
	SpentThisPeriod Money `json:"spentThisPeriod,omitempty"`
	// budgetRemaining is what the tenant has left of its budget this period,
	// in dollars. Absent means no budget.
	// +optional
	BudgetRemaining Money `json:"budgetRemaining,omitempty"`
	// queued counts the tenant's requests waiting in the gateways now.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Queued int64 `json:"queued,omitempty"`
	// refused counts the tenant's requests the gateways refused, by reason,
	// since each gateway started. Absent means none.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	Refused []RefusedCount `json:"refused,omitempty"`
	// record is what the operator's durable record holds of the tenant's
	// calendar windows: what the gateways put back into a store that comes
	// back empty or from an older snapshot. Absent means the record holds
	// nothing of the tenant yet, or the operator keeps none.
	// +optional
	Record *TenantRecord `json:"record,omitempty"`
}

// MaxRecordedWindows is the most windows a TenantRecord lists: a budget,
// 16 perTenant limits and 16 limits of each of 3 endpoints.
const MaxRecordedWindows = 1 + 16 + 3*16

// TenantRecord is what the operator's durable record holds of one tenant,
// as of the last poll of the gateways: the scope of the tenant's keys in the
// limiter's store.
type TenantRecord struct {
	// version is the version of the tenant's scope in the limiter's store
	// that the record holds. A store that holds an older one, or none, is
	// put back from the record before the gateways admit the tenant's calls.
	// +required
	// +kubebuilder:validation:Minimum=0
	Version int64 `json:"version"`
	// takenAt is when a gateway last read the tenant's windows from the
	// store for the record.
	// +optional
	TakenAt *metav1.Time `json:"takenAt,omitempty"`
	// windows are the tenant's own and its endpoints' calendar windows that
	// have not ended, by name: tenant:budget (in micro-dollars),
	// tenant:<dimension>:<per> and endpoint:<endpoint>:<dimension>:<per>,
	// with :2, :3 for a repeated limit. Windows that used nothing are left
	// out.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=65
	Windows []RecordedWindow `json:"windows,omitempty"`
	// users counts the tenant's users with a perUser window recorded.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Users int32 `json:"users,omitempty"`
}

// RecordedWindow is what one calendar window used, as recorded.
type RecordedWindow struct {
	// name is the window's key in the limiter's store, less the scope's
	// hash tag, such as tenant:budget or endpoint:chat:requests:day.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// used is what the window used, in its unit: requests, tokens or
	// micro-dollars.
	// +required
	// +kubebuilder:validation:Minimum=0
	Used int64 `json:"used"`
	// resetsAt is when the window ends.
	// +required
	ResetsAt metav1.Time `json:"resetsAt"`
}

// TenantPlanList is a list of TenantPlan.
//
// +kubebuilder:object:root=true
type TenantPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the TenantPlans.
	Items []TenantPlan `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TenantPlan{}, &TenantPlanList{})
}
