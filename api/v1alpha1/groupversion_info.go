// Package v1alpha1 holds the Sluice Kubernetes API, group sluice.dev: ProviderQuota and
// TenantPlan.
//
// +kubebuilder:object:generate=true
// +groupName=sluice.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Sluice API.
	GroupVersion = schema.GroupVersion{Group: "sluice.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Sluice types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Sluice types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
