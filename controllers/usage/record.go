package usage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	neturl "net/url"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// maxRecordBytes caps a gateway's record snapshot: what eight ConfigMaps of
// 1 MiB hold, and room for its current marks.
const maxRecordBytes = 16 << 20

// RecordStore keeps the durable record of the calendar windows (see
// gatewayv1.Record) where it outlives the gateways' store.
type RecordStore interface {
	// ReadRecord returns the record as kept, its scopes sorted by name.
	ReadRecord(ctx context.Context) (*gatewayv1.Record, error)
	// WriteRecord keeps rec in place of the record.
	WriteRecord(ctx context.Context, rec *gatewayv1.Record) error
}

// MergeRecord returns the record brought up to date at now with a
// gateway's snapshot: each scope the snapshot names merged into the
// record's (see gatewayv1.ScopeRecord.Merge), the others kept as they are.
// Windows that ended by now are dropped, and with them each scope the
// snapshot does not name once it has none left. Its scopes are sorted by
// name.
func MergeRecord(rec, snap gatewayv1.Record, now time.Time) gatewayv1.Record {
	byScope := make(map[string]gatewayv1.ScopeRecord, len(rec.Scopes))
	for _, s := range rec.Scopes {
		byScope[s.Scope] = s
	}
	named := make(map[string]bool, len(snap.Scopes))
	for _, s := range snap.Scopes {
		named[s.Scope] = true
		kept, ok := byScope[s.Scope]
		if !ok {
			kept = gatewayv1.ScopeRecord{Scope: s.Scope}
		}
		byScope[s.Scope] = kept.Merge(s)
	}
	out := gatewayv1.Record{APIVersion: gatewayv1.APIVersion, Kind: gatewayv1.RecordKind}
	for _, name := range slices.Sorted(maps.Keys(byScope)) {
		s := byScope[name]
		s.Windows = unended(s.Windows, now)
		if len(s.Windows) == 0 && !named[name] {
			continue
		}
		out.Scopes = append(out.Scopes, s)
	}
	return out
}

// unended returns the windows that end after now, in a new slice.
func unended(ws []gatewayv1.WindowsEnding, now time.Time) []gatewayv1.WindowsEnding {
	var out []gatewayv1.WindowsEnding
	for _, w := range ws {
		if w.EndsAt.After(now) {
			out = append(out, w)
		}
	}
	return out
}

// recordVersions are the versions the record holds, by scope: what a
// gateway is asked for.
func recordVersions(rec *gatewayv1.Record) map[string]int64 {
	versions := make(map[string]int64, len(rec.Scopes))
	for _, s := range rec.Scopes {
		versions[s.Scope] = s.Version
	}
	return versions
}

// recordURL is where the gateway whose usage snapshot is at usageURL
// answers for its record: the same host and port, at gatewayv1.RecordPath.
func recordURL(usageURL string) (string, error) {
	u, err := neturl.Parse(usageURL)
	if err != nil {
		return "", err
	}
	u.Path, u.RawPath, u.RawQuery = gatewayv1.RecordPath, "", ""
	return u.String(), nil
}

// keepRecord brings the durable record up to date from one gateway's
// snapshot, writes it, and returns it. gateways are those that answered the
// usage poll. The record stays as it is when it cannot be read or no
// gateway answers; nil means no record is kept, or none was ever read.
func (p *Poller) keepRecord(ctx context.Context, gateways []Gateway) *gatewayv1.Record {
	if p.Record == nil {
		return nil
	}
	p.recordMu.Lock()
	defer p.recordMu.Unlock()
	logger := log.FromContext(ctx)
	rec, err := p.Record.ReadRecord(ctx)
	if err != nil {
		logger.Error(err, "Cannot read the durable record; it stays as it was")
		return p.lastRecord()
	}
	snap, err := p.recordSnapshot(ctx, gateways, &gatewayv1.RecordRequest{Versions: recordVersions(rec)})
	if err != nil {
		logger.Error(err, "No gateway gave its record; the durable record stays as it was")
		return rec
	}
	merged := MergeRecord(*rec, *snap, p.now())
	if err := p.Record.WriteRecord(ctx, &merged); err != nil {
		logger.Error(err, "Cannot write the durable record")
		return rec
	}
	return &merged
}

// recordSnapshot asks the gateways for their record, the first by name
// first, and returns the first answer. Only one gateway is asked when it
// answers: each answer moves the store's versions on.
func (p *Poller) recordSnapshot(ctx context.Context, gateways []Gateway, req *gatewayv1.RecordRequest) (*gatewayv1.Record, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("usage: encode record request: %w", err)
	}
	gateways = slices.SortedFunc(slices.Values(gateways), func(a, b Gateway) int { return cmp.Compare(a.Name, b.Name) })
	errs := []error{errors.New("usage: no gateway answered for its record")}
	for _, g := range gateways {
		snap, err := p.fetchRecord(ctx, g.URL, body)
		if err == nil {
			return snap, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", g.Name, err))
	}
	return nil, errors.Join(errs...)
}

// fetchRecord posts the record request body to the gateway whose usage is
// at usageURL and returns its record snapshot, checked.
func (p *Poller) fetchRecord(ctx context.Context, usageURL string, body []byte) (*gatewayv1.Record, error) {
	url, err := recordURL(usageURL)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var snap gatewayv1.Record
	if err := p.do(req, maxRecordBytes, "record", &snap); err != nil {
		return nil, err
	}
	if err := snap.Validate(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return &snap, nil
}

// lastRecord is the record of the last poll, or nil.
func (p *Poller) lastRecord() *gatewayv1.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.totals == nil {
		return nil
	}
	return p.totals.Record
}
