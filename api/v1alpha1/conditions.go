package v1alpha1

// ConditionReady is the condition ProviderQuota and TenantPlan report on
// their configuration. It is True when the object is compiled into the
// configuration and every gateway that answered the operator's last poll
// has loaded it, and False with one of the reasons below when it is not. Whether a self-hosted ProviderQuota's Pods serve is
// ConditionActive's. Set
// it with meta.SetStatusCondition, so that its lastTransitionTime changes
// only when its status does.
const ConditionReady = "Ready"

// The reasons of the Ready condition.
const (
	// ReasonCompiled: the object is in the configuration the gateways load.
	ReasonCompiled = "Compiled"
	// ReasonGatewaysBehind: the object is compiled, but gateways still run
	// an older configuration: they load the new one once their Pods see
	// its Secrets change, within about a minute. The message names them.
	ReasonGatewaysBehind = "GatewaysBehind"
	// ReasonInvalidSpec: the spec passed admission but cannot be compiled,
	// such as a timeZone no time zone database knows; the message says
	// which field.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonKeySecretMissing: a ProviderQuota's apiKeySecretRef names a
	// Secret or item that does not exist, or a Secret not labelled for it, or
	// a TenantPlan's tenant has no key Secret.
	ReasonKeySecretMissing = "KeySecretMissing"
	// ReasonUnknownProvider: a TenantPlan's providers name a ProviderQuota
	// that does not exist in its namespace.
	ReasonUnknownProvider = "UnknownProvider"
	// ReasonUnknownModel: a TenantPlan's degrade names a model that none of
	// its providers serves.
	ReasonUnknownModel = "UnknownModel"
	// ReasonModelConflict: a ProviderQuota serves a model that another one
	// already serves; a request's model must pick exactly one provider.
	ReasonModelConflict = "ModelConflict"
	// ReasonTenantConflict: a TenantPlan names a tenant that another plan
	// already covers.
	ReasonTenantConflict = "TenantConflict"
	// ReasonKeyConflict: a tenant's key Secret holds the same key as another
	// key Secret already in the configuration; a key must name one tenant
	// and user.
	ReasonKeyConflict = "KeyConflict"
	// ReasonKeyTooShort: a tenant's key Secret holds a key shorter than
	// MinKeyLength characters, which is left out; the message names the
	// Secret, never the key.
	ReasonKeyTooShort = "KeyTooShort"
	// ReasonConfigTooLarge: the compiled configuration does not fit the
	// Secrets it is written to, even with each plan written once and the
	// keys spread over several; the gateways keep the configuration they
	// have. The message gives the sizes.
	ReasonConfigTooLarge = "ConfigTooLarge"
)

// ConditionActive says whether a self-hosted ProviderQuota has Pods that
// serve: True when a Pod its selector selects is ready, False while none is
// (ScaledToZero when none is selected, NoReadyPods when those selected are
// not ready), when the gateways hold its calls in their queue until one is.
// Ready says whether its configuration is in force, whatever its Pods. A
// hosted ProviderQuota has no Active condition.
const ConditionActive = "Active"

// The reasons of the Active condition.
const (
	// ReasonPodsReady: a selected Pod is ready; the message says how many
	// Pods and GPUs, and the calls in flight they take.
	ReasonPodsReady = "PodsReady"
	// ReasonNoReadyPods: Pods are selected but none is ready (starting, or
	// failing), so the quota has no capacity: the gateways hold its calls in
	// their queue (the provider is paused there), each at most its plan's
	// maxWait, until a Pod is ready. TenantPlans that name it still compile.
	ReasonNoReadyPods = "NoReadyPods"
	// ReasonScaledToZero: no Pod is selected at all: its workload is scaled
	// to zero, by design (an autoscaler on the queue depth brings a Pod up
	// when calls wait). The gateways hold its calls as with NoReadyPods.
	ReasonScaledToZero = "ScaledToZero"
)

// MinKeyLength is the fewest characters a tenant's API key may have: a
// shorter key could be guessed.
const MinKeyLength = 32

// ConditionUsageReported says whether the usage in status is current: True
// when every gateway answered the operator's latest poll, False when one did
// not (its last report, if any, is still counted, and one that never
// answered is never read as zero) or when no gateway was found. The operator
// sets it only when it polls the gateways.
const ConditionUsageReported = "UsageReported"

// The reasons of the UsageReported condition.
const (
	// ReasonGatewaysReported: every gateway answered the latest poll.
	ReasonGatewaysReported = "GatewaysReported"
	// ReasonGatewayUnreachable: a gateway did not answer the latest poll;
	// the message names it and the error.
	ReasonGatewayUnreachable = "GatewayUnreachable"
	// ReasonNoGateways: the operator found no gateway to poll.
	ReasonNoGateways = "NoGateways"
)

// ConditionLimitsBelowSpec says whether a ProviderQuota's provider reports
// lower limits than spec.limits states: True when a gateway read, in the
// provider's x-ratelimit-limit-requests or -tokens headers, a limit below
// the spec's (the gateways then pace to it, and status.learnedLimits shows
// it), False when none did. The operator sets it only when it polls the
// gateways.
const ConditionLimitsBelowSpec = "LimitsBelowSpec"

// The reasons of the LimitsBelowSpec condition.
const (
	// ReasonProviderReportsLower: the provider reports a limit lower than
	// spec.limits; the message says which.
	ReasonProviderReportsLower = "ProviderReportsLower"
	// ReasonLimitsAsSpec: no gateway read a limit lower than spec.limits.
	ReasonLimitsAsSpec = "LimitsAsSpec"
)
