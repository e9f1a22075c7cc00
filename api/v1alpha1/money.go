package v1alpha1

// Money is a non-negative amount of US dollars written as a decimal string
// with at most six decimals, such as "0.50", "5000" or "3.00". It is never a
// float, so amounts add up exactly; the gateway configuration's Money has the
// same syntax. A field that must be more than zero says so with its own rule.
//
// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]{1,6})?$`
// +kubebuilder:validation:MaxLength=24
type Money string

// RefusedCount counts the requests the gateways refused for one reason, since
// each gateway started: a gateway that restarts counts from zero again.
type RefusedCount struct {
	// reason is why the requests were refused, as the gateways name it: the
	// level and dimension of the limit that refused, such as tenant_requests
	// or provider_tokens.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason"`
	// count is the number of requests refused for reason.
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`
}
