package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// recordVersions returns the resource version of each record ConfigMap of
// namespace ns, by name; one not written is left out.
func recordVersions(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range RecordConfigMapNames(configSecretName) {
		var cm corev1.ConfigMap
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		default:
			out[name] = cm.ResourceVersion
		}
	}
	return out
}

// TestRecordConfigMapsWrite writes records into the ConfigMaps of a real
// API server: each shard is written once and then only when it changes,
// a shard too large keeps its last record and is told in an event once, and
// one edited into something that is no record is read as empty and written
// again.
func TestRecordConfigMapsWrite(t *testing.T) {
	c, ns := newNamespace(t)
	ctx := context.Background()
	events := &recorder{}
	store := &RecordConfigMaps{Client: c, Recorder: events, Namespace: ns, SecretName: configSecretName}

	// No ProviderQuota or TenantPlan to own them: nothing is written.
	acme := recordScope("tenant:acme", 4, ending(midnight, map[string]int64{"tenant:requests:day": 90}))
	globex := recordScope("tenant:globex", 1, ending(monthEnd, map[string]int64{"tenant:budget": 5_000_000}))
	if err := store.WriteRecord(ctx, recordOf(acme, globex)); err != nil {
		t.Fatal(err)
	}
	if got := recordVersions(t, c, ns); len(got) != 0 {
		t.Fatalf("record ConfigMaps written with nothing to own them: %v", got)
	}

	pq, tp := quota("openai", 0, "gpt-4o"), plan("pro", 0, []string{"acme", "globex"}, []string{"openai"})
	create(t, c, ns, &pq, &tp)
	if err := store.WriteRecord(ctx, recordOf(acme, globex)); err != nil {
		t.Fatal(err)
	}
	first := recordVersions(t, c, ns)
	if len(first) != RecordShards {
		t.Fatalf("record ConfigMaps %v; want all %d", first, RecordShards)
	}
	var cm corev1.ConfigMap
	get(t, c, ns, RecordConfigMapName(configSecretName, recordShard(acme.Scope)), &cm)
	if got := owners(t, c, &cm); !cmp.Equal(got, []string{"ProviderQuota/openai", "TenantPlan/pro"}) || cm.Labels[managedByLabel] != managedBy {
		t.Errorf("%s: owners %v, labels %v; want the ProviderQuota and the TenantPlan, and the manager's label", cm.Name, got, cm.Labels)
	}
	assertRecord(t, store, recordOf(acme, globex))

	// The same record again writes nothing; a change writes its shard only.
	if err := store.WriteRecord(ctx, recordOf(acme, globex)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, recordVersions(t, c, ns)); diff != "" {
		t.Errorf("the same record written again changed ConfigMaps (-before +after):\n%s", diff)
	}
	acme.Windows[0].Used["tenant:requests:day"] = 91
	if err := store.WriteRecord(ctx, recordOf(acme, globex)); err != nil {
		t.Fatal(err)
	}
	if got, want := changedNames(first, recordVersions(t, c, ns)), []string{RecordConfigMapName(configSecretName, recordShard(acme.Scope))}; !cmp.Equal(got, want) {
		t.Errorf("a change of acme's window rewrote %v; want %v", got, want)
	}
	assertRecord(t, store, recordOf(acme, globex))

	// Too many users for one ConfigMap: acme's shard keeps its last record,
	// the others are written, and the plan hears of it once.
	crowded := recordScope("tenant:acme", 5, ending(midnight, usersUsing(30_000)))
	globex.Version = 2
	for range 2 {
		if err := store.WriteRecord(ctx, recordOf(crowded, globex)); err != nil {
			t.Fatal(err)
		}
	}
	assertRecord(t, store, recordOf(acme, globex))
	if got := strings.Count(events.all(), "RecordTooLarge"); got != 1 || !strings.Contains(events.all(), "*v1alpha1.TenantPlan pro: Warning RecordTooLarge") {
		t.Errorf("events:\n%s\nwant one RecordTooLarge regarding the TenantPlan pro", events.all())
	}

	// A ConfigMap edited into something that is no record reads as empty,
	// and the next write puts the record back.
	get(t, c, ns, RecordConfigMapName(configSecretName, recordShard(globex.Scope)), &cm)
	cm.Data[RecordFile(recordShard(globex.Scope))] = "not a record"
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	assertRecord(t, store, recordOf(acme))
	if err := store.WriteRecord(ctx, recordOf(acme, globex)); err != nil {
		t.Fatal(err)
	}
	assertRecord(t, store, recordOf(acme, globex))
}

// usersUsing returns n users' daily request windows, each used.
func usersUsing(n int) map[string]int64 {
	used := make(map[string]int64, n)
	for i := range n {
		used[fmt.Sprintf("user:user-%015d:requests:day", i)] = 99_999
	}
	return used
}

// assertRecord checks that the store reads want.
func assertRecord(t *testing.T, store *RecordConfigMaps, want *gatewayv1.Record) {
	t.Helper()
	got, err := store.ReadRecord(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the record read back (-want +got):\n%s", diff)
	}
}

// changedNames returns the names whose version differs between before and
// after, sorted.
func changedNames(before, after map[string]string) []string {
	var out []string
	for _, name := range RecordConfigMapNames(configSecretName) {
		if before[name] != after[name] {
			out = append(out, name)
		}
	}
	return out
}
