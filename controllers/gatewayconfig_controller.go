package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/api/v1alpha1"
	"github.com/sluicehq/sluice/controllers/usage"
)

// The reconciler's permissions, for make manifests. The Secrets it reads
// and writes are those of the gateways' namespace; bind the role there.
//
// +kubebuilder:rbac:groups=sluice.dev,resources=providerquotas;tenantplans,verbs=get;list;watch
// +kubebuilder:rbac:groups=sluice.dev,resources=providerquotas/status;tenantplans/status,verbs=get;update;patch
//
// Secrets are a Role in the manager's namespace, not a ClusterRole: it reads
// the keys there and writes only its configuration's Secrets. Kubernetes
// cannot restrict create by name (a create request carries none), so create
// covers every Secret of the namespace; update is for sluice-gateway-config
// and its TenantShards tenant Secrets only.
//
// +kubebuilder:rbac:groups="",namespace=sluice-system,resources=secrets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",namespace=sluice-system,resources=secrets,resourceNames=sluice-gateway-config;sluice-gateway-config-tenants-0;sluice-gateway-config-tenants-1;sluice-gateway-config-tenants-2;sluice-gateway-config-tenants-3;sluice-gateway-config-tenants-4;sluice-gateway-config-tenants-5;sluice-gateway-config-tenants-6;sluice-gateway-config-tenants-7,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// apiKeySecretIndex indexes ProviderQuotas by the Secret their API key is
// in, so that a change of that Secret finds its namespace's configuration.
const apiKeySecretIndex = "spec.apiKeySecretRef.name"

// UsageSource gives the gateways' latest usage in a namespace, or nil when
// none is known yet. A usage.Poller is one.
type UsageSource interface {
	Usage(namespace string) *usage.Totals
}

var _ UsageSource = (*usage.Poller)(nil)

// GatewayConfigReconciler compiles the ProviderQuotas and TenantPlans of a
// namespace, with their key Secrets, into the configuration Secret and the
// tenant Secrets the gateways of that namespace mount, and writes each
// object's status. Its requests name the configuration Secret: one per
// namespace, whatever changed in it.
type GatewayConfigReconciler struct {
	// Client reads and writes the objects. In a manager, reads come from
	// its cache.
	Client client.Client
	// Recorder emits events about the objects. Nil means no events.
	Recorder events.EventRecorder
	// Clock gives the conditions' transition times. Nil means the real clock.
	Clock clock.PassiveClock
	// SecretName names the configuration Secret in each namespace.
	SecretName string
	// Base carries the configuration no object holds: the store and the
	// global limits. Nil means an in-memory store and no global limits.
	Base *gatewayv1.Config
	// Usage gives the gateways' usage for status. Nil leaves the usage in
	// status as it is.
	Usage UsageSource
	// UsageUpdates, when set, receives an event after each poll of the
	// gateways, naming the namespace polled, so that status follows.
	UsageUpdates <-chan event.GenericEvent
}

// SetupWithManager registers the reconciler and its watches: ProviderQuotas
// and TenantPlans whose spec changed, the Secrets they draw on, the
// configuration's own Secrets, the readiness of the Pods self-hosted
// ProviderQuotas select, and the usage poller's updates. Pods are read
// through the manager's cache; TrimPod keeps that cache small.
func (r *GatewayConfigReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ProviderQuota{}, apiKeySecretIndex, func(o client.Object) []string {
		if ref := o.(*v1alpha1.ProviderQuota).Spec.APIKeySecretRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("controllers: index ProviderQuotas by key Secret: %w", err)
	}
	toConfig := handler.EnqueueRequestsFromMapFunc(r.configOf)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gatewayconfig").
		Watches(&v1alpha1.ProviderQuota{}, toConfig, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.TenantPlan{}, toConfig, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.configOfSecret)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.configOfPod), builder.WithPredicates(podCapacityChanged))
	if r.UsageUpdates != nil {
		b = b.WatchesRawSource(source.Channel(r.UsageUpdates, toConfig))
	}
	return b.Complete(r)
}

// configOf maps an object to its namespace's configuration Secret.
func (r *GatewayConfigReconciler) configOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: r.SecretName}}}
}

// configOfSecret maps a Secret to its namespace's configuration Secret if it
// is that Secret, a tenant's key, or a provider's key; other Secrets are no
// concern of the configuration.
func (r *GatewayConfigReconciler) configOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	if r.ownSecret(o.GetName()) || o.GetLabels()[v1alpha1.LabelTenant] != "" {
		return r.configOf(ctx, o)
	}
	var refs v1alpha1.ProviderQuotaList
	err := r.Client.List(ctx, &refs, client.InNamespace(o.GetNamespace()), client.MatchingFields{apiKeySecretIndex: o.GetName()})
	if err == nil && len(refs.Items) == 0 {
		return nil
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List ProviderQuotas by key Secret; compiling anyway", "secret", o.GetName())
	}
	return r.configOf(ctx, o)
}

// configOfPod maps a Pod to its namespace's configuration Secret if a
// self-hosted ProviderQuota selects it. An update is mapped from the Pod
// before and after, so a Pod whose labels stop matching counts too.
func (r *GatewayConfigReconciler) configOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	var pqs v1alpha1.ProviderQuotaList
	if err := r.Client.List(ctx, &pqs, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List ProviderQuotas for a Pod; compiling anyway", "pod", o.GetName())
		return r.configOf(ctx, o)
	}
	if !selectedBySelfHosted(pqs.Items, o) {
		return nil
	}
	return r.configOf(ctx, o)
}

// Reconcile gathers the namespace's objects, compiles them, writes the
// configuration's Secrets that changed, and then each object's status when
// it changed. A status is written only once the Secrets hold what it
// reports. A configuration with a Secret past the size a Secret holds is
// not written at all: the objects it would have carried say ConfigTooLarge
// instead.
func (r *GatewayConfigReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	in, err := r.gather(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	out, err := Compile(*in)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired, err := configSecrets(req.NamespacedName, in, out)
	if err != nil {
		return ctrl.Result{}, err
	}
	if s, size := oversized(desired); s != nil {
		// Retrying cannot help: the statuses say why, and a change of the
		// objects compiles again.
		ctrl.LoggerFrom(ctx).Info("The gateway configuration does not fit its Secrets", "secret", s.Name, "bytes", size)
		out = tooLarge(out, s, size)
		countReasons(req.Namespace, out)
		return ctrl.Result{}, r.writeStatuses(ctx, req.Namespace, in, out, "")
	}
	if err := r.writeSecrets(ctx, desired, out); err != nil {
		return ctrl.Result{}, err
	}
	countReasons(req.Namespace, out)
	return ctrl.Result{}, r.writeStatuses(ctx, req.Namespace, in, out, configFileSum(desired))
}

// ownSecret reports whether the Secret named name is one of the
// configuration's: the configuration Secret or a tenant Secret.
func (r *GatewayConfigReconciler) ownSecret(name string) bool {
	return name == r.SecretName || strings.HasPrefix(name, tenantSecretPrefix(r.SecretName))
}

// gather lists the namespace's ProviderQuotas, TenantPlans and Secrets, but
// the configuration's own, which are no input, and counts the ready Pods of
// its self-hosted ProviderQuotas.
func (r *GatewayConfigReconciler) gather(ctx context.Context, namespace string) (*Inputs, error) {
	var pqs v1alpha1.ProviderQuotaList
	var tps v1alpha1.TenantPlanList
	var secrets corev1.SecretList
	for what, list := range map[string]client.ObjectList{"ProviderQuotas": &pqs, "TenantPlans": &tps, "Secrets": &secrets} {
		if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("controllers: list %s in %s: %w", what, namespace, err)
		}
	}
	in := &Inputs{Base: r.Base, ProviderQuotas: pqs.Items, TenantPlans: tps.Items}
	for _, s := range secrets.Items {
		if !r.ownSecret(s.Name) {
			in.Secrets = append(in.Secrets, s)
		}
	}
	if hasSelfHosted(pqs.Items) {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("controllers: list Pods in %s: %w", namespace, err)
		}
		in.ReadyPods = ReadyPodIPs(pqs.Items, pods.Items)
		in.SelectedPods = SelectedPodCounts(pqs.Items, pods.Items)
	}
	return in, nil
}

// writeSecrets writes the configuration's Secrets, desired, in order: the
// tenant Secrets, then the configuration Secret, whose config.yaml names
// their hashes, so that a gateway that reads it finds the tenant files it
// names or, until they arrive, refuses the mix and keeps its configuration.
func (r *GatewayConfigReconciler) writeSecrets(ctx context.Context, desired []*corev1.Secret, out *Output) error {
	var verb string
	for _, s := range desired {
		var err error
		if verb, err = r.writeSecret(ctx, s); err != nil {
			return err
		}
	}
	if verb != "" {
		r.secretWritten(ctx, desired[len(desired)-1], out, verb)
	}
	return nil
}

// writeSecret creates or updates one Secret, desired, in one write, or
// leaves it when it already holds the compile, and says which it did:
// "Created", "Updated" or "". With no objects left it writes nothing: the
// garbage collector removes the Secrets they owned, and an ownerless Secret
// rewritten here would stay for ever.
func (r *GatewayConfigReconciler) writeSecret(ctx context.Context, desired *corev1.Secret) (string, error) {
	if len(desired.OwnerReferences) == 0 {
		return "", nil
	}
	key := client.ObjectKeyFromObject(desired)
	var existing corev1.Secret
	err := r.Client.Get(ctx, key, &existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, desired); err != nil {
			return "", fmt.Errorf("controllers: create Secret %s: %w", key, err)
		}
		return "Created", nil
	case err != nil:
		return "", fmt.Errorf("controllers: get Secret %s: %w", key, err)
	case secretUpToDate(&existing, desired):
		return "", nil
	}
	updateSecret(&existing, desired)
	if err := r.Client.Update(ctx, &existing); err != nil {
		return "", fmt.Errorf("controllers: update Secret %s: %w", key, err)
	}
	return "Updated", nil
}

// secretWritten logs and records a write of the configuration Secret by
// its counts: never its contents, nor their hash.
func (r *GatewayConfigReconciler) secretWritten(ctx context.Context, s *corev1.Secret, out *Output, verb string) {
	ctrl.LoggerFrom(ctx).Info(verb+" the gateway configuration", "secret", s.Name,
		"providers", len(out.Config.Providers), "plans", len(out.Config.Plans), "tenants", len(out.Config.Tenants))
	r.event(s, "Normal", "ConfigurationWritten", "Compile",
		fmt.Sprintf("%s with %s and %s.", verb, countOf(len(out.Config.Providers), "provider"), countOf(len(out.Config.Tenants), "tenant")))
}

// writeStatuses writes the status of every object whose status changed, and
// goes on past an object it cannot write.
func (r *GatewayConfigReconciler) writeStatuses(ctx context.Context, namespace string, in *Inputs, out *Output, config string) error {
	var u *usage.Totals
	if r.Usage != nil {
		u = r.Usage.Usage(namespace)
	}
	behind := u.Behind(config)
	now := r.now()
	var errs []error
	for i := range in.ProviderQuotas {
		pq := &in.ProviderQuotas[i]
		res := out.ProviderQuotas[pq.Name]
		res.Result = loadedBy(res.Result, behind)
		st := providerQuotaStatus(pq, res, u, now)
		if equality.Semantic.DeepEqual(pq.Status, st) {
			continue
		}
		before := pq.DeepCopy()
		pq.Status = st
		errs = append(errs, r.patchStatus(ctx, "ProviderQuota", pq, before, before.Status.Conditions, st.Conditions))
	}
	for i := range in.TenantPlans {
		tp := &in.TenantPlans[i]
		res := out.TenantPlans[tp.Name]
		res.Result = loadedBy(res.Result, behind)
		st := tenantPlanStatus(tp, res, u, now)
		if equality.Semantic.DeepEqual(tp.Status, st) {
			continue
		}
		before := tp.DeepCopy()
		tp.Status = st
		errs = append(errs, r.patchStatus(ctx, "TenantPlan", tp, before, before.Status.Conditions, st.Conditions))
	}
	return errors.Join(errs...)
}

// patchStatus patches obj's status from before's, and records a change of
// readiness, of a self-hosted provider's ready Pods, or of the limits a
// provider reports, from the conditions was to now. An object deleted meanwhile is
// no error.
func (r *GatewayConfigReconciler) patchStatus(ctx context.Context, kind string, obj, before client.Object, was, now []metav1.Condition) error {
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("controllers: patch status of %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if eventType, reason, note, ok := readyEvent(was, now); ok {
		r.event(obj, eventType, reason, "Compile", note)
	}
	if eventType, reason, note, ok := activeEvent(was, now); ok {
		r.event(obj, eventType, reason, "CountReadyPods", note)
	}
	if eventType, reason, note, ok := limitsEvent(was, now); ok {
		r.event(obj, eventType, reason, "ReadProviderLimits", note)
	}
	return nil
}

func (r *GatewayConfigReconciler) event(regarding client.Object, eventType, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, nil, eventType, reason, action, "%s", note)
	}
}

// now is the clock's time to the second, as the API server stores it.
func (r *GatewayConfigReconciler) now() time.Time {
	c := r.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return c.Now().Truncate(time.Second)
}
