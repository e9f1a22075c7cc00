package controllers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
)

// TestSamplesCompile applies config/samples to a real API server, as `kubectl apply -k` would,
// and checks that the reconciler compiles every object Ready into a configuration the gateway
// accepts.
func TestSamplesCompile(t *testing.T) {
	c, ns := newNamespace(t)
	ctx := context.Background()
	for _, file := range []string{"../config/samples/providerquota.yaml", "../config/samples/tenantplan.yaml", "../config/samples/selfhosted.yaml", "../config/samples/anthropic.yaml"} {
		for _, obj := range readObjects(t, file) {
			obj.SetNamespace(ns)
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("create %s %s from %s: %v", obj.GetKind(), obj.GetName(), file, err)
			}
		}
	}

	r := &GatewayConfigReconciler{Client: c, Recorder: &recorder{}, SecretName: configSecretName}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: configSecretName}}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	for _, quota := range []string{"openai", "anthropic"} {
		assertReady(t, c, ns, &v1alpha1.ProviderQuota{}, quota, metav1.ConditionTrue, v1alpha1.ReasonCompiled)
	}
	for _, plan := range []string{"free", "pro", "enterprise", "claude-team"} {
		assertReady(t, c, ns, &v1alpha1.TenantPlan{}, plan, metav1.ConditionTrue, v1alpha1.ReasonCompiled)
	}
	cfg, err := loadWritten(t, c, ns)
	if err != nil {
		t.Fatalf("the compiled samples do not parse as a gateway configuration: %v", err)
	}
	tenants := map[string]gatewayv1.Tenant{}
	for _, tenant := range cfg.Tenants {
		tenants[tenant.Name] = tenant
	}
	acme, free := tenants["acme"], tenants["initech"]
	if len(cfg.Providers) != 3 || len(acme.Keys) != 1 || acme.Keys[0].SHA256 != gatewayv1.HashKey("sk-acme-alice-0123456789abcdef0123456789") || acme.Budget == nil || acme.Degrade == nil {
		t.Errorf("compiled samples = %d providers, acme %+v; want openai, llama (paused, no Pod) and anthropic, and acme on the enterprise plan with alice's key hash", len(cfg.Providers), acme)
	}
	if claude := providerNamed(cfg, "anthropic"); claude == nil || claude.API != gatewayv1.APIAnthropic || claude.AnthropicVersion != "2023-06-01" {
		t.Errorf("compiled samples' provider anthropic = %+v; want Anthropic's API at version 2023-06-01", claude)
	}
	if len(free.PerUser) != 1 || free.PerUser[0].Amount != 50 || free.PerUser[0].Per != gatewayv1.PeriodDay || free.PerUser[0].OnLimit != gatewayv1.BehaviorReject {
		t.Errorf("initech = %+v; want the free plan: 50 requests a day per user, refused past that", free)
	}
}

// readObjects decodes every object of a multi-document YAML file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// providerNamed is cfg's provider of that name, or nil.
func providerNamed(cfg *gatewayv1.Config, name string) *gatewayv1.Provider {
	for i := range cfg.Providers {
		if cfg.Providers[i].Name == name {
			return &cfg.Providers[i]
		}
	}
	return nil
}
