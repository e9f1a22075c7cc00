package v1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScopeRecordMerge(t *testing.T) {
	at := func(h int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 2, h, 0, 0, 0, time.UTC)) }
	day := func(used int64) []WindowsEnding {
		return []WindowsEnding{{EndsAt: at(24), Used: map[string]int64{"tenant:requests:day": used}}}
	}
	yesterday := WindowsEnding{EndsAt: at(0), Used: map[string]int64{"tenant:requests:day": 900}}
	rec := ScopeRecord{Scope: "tenant:acme", Version: 4, TakenAt: at(10), Windows: append([]WindowsEnding{yesterday}, day(50)...)}
	tests := []struct {
		name string
		snap ScopeRecord
		want ScopeRecord
	}{{
		name: "a current snapshot replaces the record",
		snap: ScopeRecord{Scope: "tenant:acme", Version: 5, TakenAt: at(11), Windows: day(40), Current: true},
		want: ScopeRecord{Scope: "tenant:acme", Version: 5, TakenAt: at(11), Windows: day(40)},
	}, {
		name: "a current snapshot of the same windows leaves the record as it is",
		snap: ScopeRecord{Scope: "tenant:acme", Version: 5, TakenAt: at(11), Windows: rec.Windows, Current: true},
		want: rec,
	}, {
		name: "a snapshot of a store behind the record raises it, at the record's version",
		snap: ScopeRecord{Scope: "tenant:acme", Version: 2, TakenAt: at(11), Windows: day(30)},
		want: ScopeRecord{Scope: "tenant:acme", Version: 4, TakenAt: at(11), Windows: day(50)},
	}, {
		name: "and never lowers it",
		snap: ScopeRecord{Scope: "tenant:acme", Version: 2, TakenAt: at(11), Windows: day(70)},
		want: ScopeRecord{Scope: "tenant:acme", Version: 4, TakenAt: at(11), Windows: day(70)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, rec.Merge(tc.snap)); diff != "" {
				t.Errorf("Merge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadReadsRecordFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := `apiVersion: gateway.sluice.dev/v1
kind: GatewayConfig
recordFiles: [record-0.json, record-1.json, missing.json]
record:
  - {scope: "tenant:inline", version: 1}
`
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("config.yaml", cfg)
	write("record-0.json", `{"apiVersion":"gateway.sluice.dev/v1","kind":"Record","scopes":[{"scope":"tenant:acme","version":3,"windows":[{"endsAt":"2026-12-03T00:00:00Z","used":{"tenant:budget":42}}]}]}`)
	write("record-1.json", "") // an optional ConfigMap's item not written yet
	c, err := Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Record) != 2 || c.Record[1].Scope != "tenant:acme" || c.Record[1].Windows[0].Used["tenant:budget"] != 42 {
		t.Fatalf("record %+v; want the inline scope, then the file's", c.Record)
	}
	for name, data := range map[string]string{
		"a file of another kind":   `{"apiVersion":"gateway.sluice.dev/v1","kind":"TenantList"}`,
		"a scope with braces":      `{"apiVersion":"gateway.sluice.dev/v1","kind":"Record","scopes":[{"scope":"{tenant:acme}","version":1}]}`,
		"a negative use":           `{"apiVersion":"gateway.sluice.dev/v1","kind":"Record","scopes":[{"scope":"tenant:acme","version":1,"windows":[{"endsAt":"2026-12-03T00:00:00Z","used":{"tenant:budget":-1}}]}]}`,
		"a scope the file repeats": `{"apiVersion":"gateway.sluice.dev/v1","kind":"Record","scopes":[{"scope":"tenant:inline","version":1}]}`,
	} {
		write("record-1.json", data)
		if _, err := Load(filepath.Join(dir, "config.yaml")); err == nil || !strings.Contains(err.Error(), "record") {
			t.Errorf("%s: Load = %v; want an error naming the record", name, err)
		}
	}
}
