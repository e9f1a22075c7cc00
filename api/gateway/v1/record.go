package v1

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Record is the durable record of what the calendar windows (budgets, day
// and month quotas, a provider's month of spend) have used, kept outside the
// limiter's store so that a store that comes back empty, or from an older
// snapshot, is put back before it admits calls. The operator keeps it, from
// the gateways' snapshots (see RecordSnapshot), in ConfigMaps that the
// gateways read as recordFiles; without Kubernetes, any copy of a snapshot
// saved as a file serves.
//
// The record is kept per scope: the hash tag that a tenant's limits (its
// own, its endpoints' and its users'), a provider's or the global ones share
// in the store. A scope's version says which of the store's states it
// holds: a store whose mark for the scope is missing, or older than the
// version the gateway's record holds, is re-seeded from the record first.
type Record struct {
	// apiVersion must be APIVersion.
	APIVersion string `json:"apiVersion"`
	// kind must be RecordKind.
	Kind string `json:"kind"`
	// scopes hold one entry per scope, sorted by name.
	Scopes []ScopeRecord `json:"scopes,omitempty"`
}

// RecordKind is the kind of a record file.
const RecordKind = "Record"

// ScopeRecord is what one scope's calendar windows used, as of a version.
type ScopeRecord struct {
	// scope names the scope: "tenant:<name>", a provider's name, or
	// "sluice:global". It is the hash tag of every key in windows.
	Scope string `json:"scope"`
	// version is the store's version of the scope that this record holds,
	// at least 0. A store that holds an older one (or none) is re-seeded.
	Version int64 `json:"version"`
	// takenAt is when the store was read.
	TakenAt metav1.Time `json:"takenAt,omitzero"`
	// windows group the scope's windows by when they end.
	Windows []WindowsEnding `json:"windows,omitempty"`
	// current is set in a gateway's snapshot only (see RecordPath): true
	// when the store held at least the version requested, so that it holds
	// everything the record does; its windows replace the record's, at the
	// version given, which the store now holds. False means the store is
	// behind the record (it came back empty or from an older snapshot, and
	// was not yet re-seeded from the version requested): its windows may
	// only raise the record's, whose version stays.
	Current bool `json:"current,omitempty"`
}

// WindowsEnding are the windows of a scope that end at one time: what
// each used, by its key in the store less the scope's "{tag}:" prefix.
type WindowsEnding struct {
	// endsAt is when the windows end: midnight, or the first of a month,
	// in their time zone.
	EndsAt metav1.Time `json:"endsAt"`
	// used is what each window used, in its unit (requests, tokens or
	// micro-dollars), by key. Windows that used nothing are left out.
	Used map[string]int64 `json:"used"`
}

// Prefix is the start of every store key of the scope: its hash tag.
func (s ScopeRecord) Prefix() string { return "{" + s.Scope + "}:" }

// Validate reports what is wrong with a record read from a file.
func (r *Record) Validate() error {
	if r.APIVersion != APIVersion || r.Kind != RecordKind {
		return fmt.Errorf("a record must have apiVersion %s and kind %s", APIVersion, RecordKind)
	}
	return validateRecord(field.NewPath("scopes"), r.Scopes).ToAggregate()
}

// validateRecord checks a record's scopes: each named once, as a hash tag's
// name, at a version of at least 0, its windows keyed and using at least 0.
func validateRecord(p *field.Path, scopes []ScopeRecord) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range scopes {
		sp := p.Index(i)
		switch {
		case s.Scope == "" || strings.ContainsAny(s.Scope, "{}"):
			errs = append(errs, field.Invalid(sp.Child("scope"), s.Scope, "must be a hash tag's name, without braces, such as tenant:acme"))
		case seen[s.Scope]:
			errs = append(errs, field.Duplicate(sp.Child("scope"), s.Scope))
		}
		seen[s.Scope] = true
		if s.Version < 0 {
			errs = append(errs, field.Invalid(sp.Child("version"), s.Version, "must be at least 0"))
		}
		for j, w := range s.Windows {
			for key, used := range w.Used {
				if key == "" || used < 0 {
					errs = append(errs, field.Invalid(sp.Child("windows").Index(j).Child("used").Key(key), used, "must name a window and be at least 0"))
				}
			}
		}
	}
	return errs
}

// RecordRequest is what the operator posts to a gateway's RecordPath: the
// version its record holds of each scope, so that the gateway moves on only
// the scopes whose store holds at least that (see ScopeRecord.Current).
type RecordRequest struct {
	// versions are the record's versions by scope. A scope not named has
	// version 0.
	Versions map[string]int64 `json:"versions,omitempty"`
}

// RecordPath is where a gateway's admin port answers a POST of a
// RecordRequest with a Record: every scope of its configuration that has
// calendar windows, as the store holds it, each marked current or not. Saved
// as a file, the answer is a record a gateway can read.
const RecordPath = "/admin/record"

// Merge returns the record's scope s brought up to date with the store's
// snapshot of it. A current snapshot replaces it, unless its windows are the
// record's: then nothing was used since, and the record stands as it is (the
// store, whose version has moved past the record's, holds all it does), so
// that a quiet scope is not written again at each poll. A snapshot that is
// not current leaves the record's version, each window at the larger use of
// the two; a window of the record that ended before the snapshot was taken
// is dropped.
func (s ScopeRecord) Merge(snap ScopeRecord) ScopeRecord {
	if snap.Current {
		if s.Version > 0 && sameWindows(s.Windows, snap.Windows) {
			return s
		}
		snap.Current = false
		return snap
	}
	out := ScopeRecord{Scope: s.Scope, Version: s.Version, TakenAt: snap.TakenAt}
	byEnd := map[int64]map[string]int64{}
	add := func(ws []WindowsEnding) {
		for _, w := range ws {
			if w.EndsAt.Before(&snap.TakenAt) {
				continue
			}
			end := w.EndsAt.Unix()
			if byEnd[end] == nil {
				byEnd[end] = map[string]int64{}
				out.Windows = append(out.Windows, WindowsEnding{EndsAt: w.EndsAt, Used: byEnd[end]})
			}
			for key, used := range w.Used {
				byEnd[end][key] = max(byEnd[end][key], used)
			}
		}
	}
	add(s.Windows)
	add(snap.Windows)
	SortWindows(out.Windows)
	return out
}

// sameWindows reports whether a and b, each sorted by when they end, hold
// the same uses.
func sameWindows(a, b []WindowsEnding) bool {
	return slices.EqualFunc(a, b, func(x, y WindowsEnding) bool {
		return x.EndsAt.Equal(&y.EndsAt) && maps.Equal(x.Used, y.Used)
	})
}

// SortWindows sorts windows by when they end.
func SortWindows(ws []WindowsEnding) {
	slices.SortFunc(ws, func(a, b WindowsEnding) int { return a.EndsAt.Compare(b.EndsAt.Time) })
}
