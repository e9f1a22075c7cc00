package usage

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// The tests' calendar: the poll is at epoch, midday on 1 March.
var (
	yesterday = metav1.NewTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	midnight  = metav1.NewTime(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	monthEnd  = metav1.NewTime(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	takenAt   = metav1.NewTime(epoch.Add(-time.Second))
)

func windows(endsAt metav1.Time, used map[string]int64) gatewayv1.WindowsEnding {
	return gatewayv1.WindowsEnding{EndsAt: endsAt, Used: used}
}

func scope(name string, version int64, at metav1.Time, ws ...gatewayv1.WindowsEnding) gatewayv1.ScopeRecord {
	return gatewayv1.ScopeRecord{Scope: name, Version: version, TakenAt: at, Windows: ws}
}

func current(s gatewayv1.ScopeRecord) gatewayv1.ScopeRecord {
	s.Current = true
	return s
}

func record(scopes ...gatewayv1.ScopeRecord) gatewayv1.Record {
	return gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind, Scopes: scopes}
}

func TestMergeRecord(t *testing.T) {
	earlier := metav1.NewTime(epoch.Add(-time.Hour))
	tests := []struct {
		name      string
		rec, snap gatewayv1.Record
		want      gatewayv1.Record
	}{{
		name: "a current scope replaces the record's, at the gateway's version",
		rec:  record(scope("tenant:acme", 3, earlier, windows(midnight, map[string]int64{"tenant:requests:day": 90}))),
		snap: record(current(scope("tenant:acme", 4, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 40})))),
		want: record(scope("tenant:acme", 4, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 40}))),
	}, {
		name: "a store behind the record raises its windows, never lowers them, and leaves its version",
		rec: record(scope("tenant:acme", 3, earlier,
			windows(midnight, map[string]int64{"tenant:requests:day": 90, "user:alice:tokens:day": 500}),
			windows(monthEnd, map[string]int64{"tenant:budget": 7_000_000}))),
		snap: record(scope("tenant:acme", 0, takenAt,
			windows(midnight, map[string]int64{"tenant:requests:day": 2, "user:alice:tokens:day": 800, "user:bob:tokens:day": 10}))),
		want: record(scope("tenant:acme", 3, takenAt,
			windows(midnight, map[string]int64{"tenant:requests:day": 90, "user:alice:tokens:day": 800, "user:bob:tokens:day": 10}),
			windows(monthEnd, map[string]int64{"tenant:budget": 7_000_000}))),
	}, {
		name: "a scope new to the record comes in at the gateway's version, or 0 when its store is behind",
		snap: record(current(scope("openai", 2, takenAt, windows(monthEnd, map[string]int64{"provider:microdollars:month": 1_500_000}))),
			scope("tenant:acme", 5, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 1}))),
		want: record(scope("openai", 2, takenAt, windows(monthEnd, map[string]int64{"provider:microdollars:month": 1_500_000})),
			scope("tenant:acme", 0, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 1}))),
	}, {
		name: "a scope the gateway no longer names stays while a window has not ended, less those that have",
		rec: record(scope("tenant:gone", 7, earlier,
			windows(yesterday, map[string]int64{"tenant:requests:day": 50}),
			windows(monthEnd, map[string]int64{"tenant:budget": 9}))),
		want: record(scope("tenant:gone", 7, earlier, windows(monthEnd, map[string]int64{"tenant:budget": 9}))),
	}, {
		name: "a scope the gateway no longer names goes once its windows have all ended",
		rec: record(scope("tenant:gone", 7, earlier, windows(yesterday, map[string]int64{"tenant:requests:day": 50})),
			scope("tenant:idle", 1, earlier)),
		want: record(),
	}, {
		name: "a scope the gateway names stays with no window: its version counts",
		rec:  record(scope("tenant:acme", 3, earlier, windows(yesterday, map[string]int64{"tenant:requests:day": 50}))),
		snap: record(current(scope("tenant:acme", 4, takenAt))),
		want: record(scope("tenant:acme", 4, takenAt)),
	}, {
		name: "scopes come out sorted by name",
		rec:  record(scope("tenant:b", 1, earlier, windows(midnight, map[string]int64{"tenant:requests:day": 1}))),
		snap: record(current(scope("tenant:c", 1, takenAt)), current(scope("sluice:global", 1, takenAt)), current(scope("tenant:a", 1, takenAt))),
		want: record(scope("sluice:global", 1, takenAt), scope("tenant:a", 1, takenAt),
			scope("tenant:b", 1, earlier, windows(midnight, map[string]int64{"tenant:requests:day": 1})), scope("tenant:c", 1, takenAt)),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeRecord(tc.rec, tc.snap, epoch)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MergeRecord (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordURL(t *testing.T) {
	tests := []struct{ usage, want string }{
		{"http://10.0.0.7:9090/admin/usage", "http://10.0.0.7:9090/admin/record"},
		{"http://gw.example:9090/admin/queues?x=1", "http://gw.example:9090/admin/record"},
		{"https://[::1]:9443/prefix/admin/usage", "https://[::1]:9443/admin/record"},
	}
	for _, tc := range tests {
		got, err := recordURL(tc.usage)
		if err != nil || got != tc.want {
			t.Errorf("recordURL(%q) = %q, %v; want %q", tc.usage, got, err, tc.want)
		}
	}
}

// memoryRecord is a RecordStore in memory: what it holds, the writes it
// took, and an error to fail reads with.
type memoryRecord struct {
	rec     gatewayv1.Record
	writes  int
	readErr error
}

func (m *memoryRecord) ReadRecord(context.Context) (*gatewayv1.Record, error) {
	if m.readErr != nil {
		return nil, m.readErr
	}
	rec := m.rec
	return &rec, nil
}

func (m *memoryRecord) WriteRecord(_ context.Context, rec *gatewayv1.Record) error {
	m.rec, m.writes = *rec, m.writes+1
	return nil
}

// recordingGateway answers GET Path with an empty usage snapshot and POST
// RecordPath with its record; it keeps the record requests it took. A
// failing gateway answers 503 to both, one whose record fails only to the
// record.
type recordingGateway struct {
	record        gatewayv1.Record
	failing       bool
	recordFailing bool

	mu       sync.Mutex
	requests []gatewayv1.RecordRequest
}

func (g *recordingGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case g.failing:
		http.Error(w, "down", http.StatusServiceUnavailable)
	case r.Method == http.MethodGet && r.URL.Path == Path:
		json.NewEncoder(w).Encode(gatewayv1.Usage{Time: metav1.NewTime(epoch)})
	case r.Method == http.MethodPost && r.URL.Path == gatewayv1.RecordPath:
		var req gatewayv1.RecordRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		g.requests = append(g.requests, req)
		g.mu.Unlock()
		if g.recordFailing {
			http.Error(w, "no record", http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(g.record)
	default:
		http.NotFound(w, r)
	}
}

func (g *recordingGateway) asked() []gatewayv1.RecordRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests
}

// namedGateways lists fixed gateways.
type namedGateways []Gateway

func (n namedGateways) Gateways(context.Context) ([]Gateway, error) { return n, nil }

// TestPollerKeepsRecord polls gateways served over HTTP on loopback and
// checks which one is asked for its record, what it is asked, and what the
// store keeps.
func TestPollerKeepsRecord(t *testing.T) {
	kept := record(scope("tenant:acme", 3, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 90})))
	behind := record(scope("tenant:acme", 0, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 5, "user:bob:requests:day": 5})))
	merged := record(scope("tenant:acme", 3, takenAt, windows(midnight, map[string]int64{"tenant:requests:day": 90, "user:bob:requests:day": 5})))
	tests := []struct {
		name       string
		a, b       *recordingGateway // the gateways "gw-a" and "gw-b", listed b first
		readErr    error
		wantAsked  [2]int // record requests taken by a and b
		wantWrites int
		want       gatewayv1.Record // what the store holds after the poll
	}{{
		name:      "the first gateway by name is the only one asked",
		a:         &recordingGateway{record: behind},
		b:         &recordingGateway{record: record()},
		wantAsked: [2]int{1, 0}, wantWrites: 1, want: merged,
	}, {
		name:      "the next gateway is asked when the first fails",
		a:         &recordingGateway{record: record(), recordFailing: true},
		b:         &recordingGateway{record: behind},
		wantAsked: [2]int{1, 1}, wantWrites: 1, want: merged,
	}, {
		name:      "a gateway that did not answer the usage poll is not asked",
		a:         &recordingGateway{record: record(), failing: true},
		b:         &recordingGateway{record: behind},
		wantAsked: [2]int{0, 1}, wantWrites: 1, want: merged,
	}, {
		name:      "when no gateway gives its record, the record stays as it is",
		a:         &recordingGateway{recordFailing: true},
		b:         &recordingGateway{failing: true},
		wantAsked: [2]int{1, 0}, want: kept,
	}, {
		name:    "when the record cannot be read, no gateway is asked",
		a:       &recordingGateway{record: behind},
		b:       &recordingGateway{record: behind},
		readErr: errors.New("etcd is away"),
		want:    kept,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sa, sb := httptest.NewServer(tc.a), httptest.NewServer(tc.b)
			defer sa.Close()
			defer sb.Close()
			store := &memoryRecord{rec: kept, readErr: tc.readErr}
			p := &Poller{
				Namespace: "sluice",
				Gateways:  namedGateways{{Name: "gw-b", URL: sb.URL + Path}, {Name: "gw-a", URL: sa.URL + Path}},
				Clock:     clocktesting.NewFakeClock(epoch),
				Record:    store,
			}
			p.Poll(context.Background())

			if got := [2]int{len(tc.a.asked()), len(tc.b.asked())}; got != tc.wantAsked {
				t.Errorf("record requests to gw-a and gw-b = %v; want %v", got, tc.wantAsked)
			}
			for _, req := range append(tc.a.asked(), tc.b.asked()...) {
				if diff := cmp.Diff(map[string]int64{"tenant:acme": 3}, req.Versions); diff != "" {
					t.Errorf("requested versions (-want +got):\n%s", diff)
				}
			}
			if store.writes != tc.wantWrites {
				t.Errorf("record writes = %d; want %d", store.writes, tc.wantWrites)
			}
			if diff := cmp.Diff(tc.want, store.rec); diff != "" {
				t.Errorf("kept record (-want +got):\n%s", diff)
			}
			wantShown := &tc.want
			if tc.readErr != nil {
				wantShown = nil // nothing read yet
			}
			if diff := cmp.Diff(wantShown, p.Usage("sluice").Record); diff != "" {
				t.Errorf("Usage().Record (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPollerRefusesABadRecord checks that an answer that is no record is
// not merged: the next gateway is asked instead.
func TestPollerRefusesABadRecord(t *testing.T) {
	bad := recordingGateway{record: gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: "Usage"}}
	good := recordingGateway{record: record(current(scope("tenant:acme", 1, takenAt)))}
	sa, sb := httptest.NewServer(&bad), httptest.NewServer(&good)
	defer sa.Close()
	defer sb.Close()
	store := &memoryRecord{}
	p := &Poller{Namespace: "sluice", Gateways: namedGateways{{Name: "gw-a", URL: sa.URL + Path}, {Name: "gw-b", URL: sb.URL + Path}}, Record: store}
	p.Poll(context.Background())
	if diff := cmp.Diff(record(scope("tenant:acme", 1, takenAt)), store.rec); diff != "" {
		t.Errorf("kept record (-want +got):\n%s", diff)
	}
}
