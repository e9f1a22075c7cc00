package v1alpha1

// ConditionReady is the one condition type ProviderQuota and TenantPlan
// report. It is True when the object is compiled into the configuration the
// gateways load, and False with one of the reasons below when it is not. Set
// it with meta.SetStatusCondition, so that its lastTransitionTime changes
// only when its status does.
const ConditionReady = "Ready"

// The reasons of the Ready condition.
const (
	// ReasonCompiled: the object is in the configuration the gateways load.
	ReasonCompiled = "Compiled"
	// ReasonInvalidSpec: the spec passed admission but cannot be compiled,
	// such as a timeZone no time zone database knows; the message says
	// which field.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonKeySecretMissing: a ProviderQuota's apiKeySecretRef names a
	// Secret or item that does not exist, or a TenantPlan's tenant has no key
	// Secret.
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
)
