package policy

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Scope is the calendar windows (budgets, day and month quotas) of one hash tag: a tenant's (its
// own, its endpoints' and its users'), a provider's month of spend, or the global ones; with
// their mark and what the durable record holds of them (see ratelimit.NewMark). A call whose
// checks take from a scope's windows checks its mark too, at the record's version.
type Scope struct {
	// Name is the scope's hash tag, without braces: "tenant:acme", "openai", "sluice:global".
	Name string
	// Mark is the scope's mark in the store.
	Mark *ratelimit.Limit
	// Windows are the scope's calendar windows, each once, in the order they were built.
	Windows []*ratelimit.Limit
	// Record is what the configuration's record holds of the scope; its zero value (version 0,
	// nothing used) when it holds nothing.
	Record gatewayv1.ScopeRecord
}

// newScope returns the scope of hash tag name over the shared form of rules' calendar windows,
// or nil when they hold none, at the record's entry for it.
func newScope(name string, level ratelimit.Level, record map[string]gatewayv1.ScopeRecord, rules ...[]rule) *Scope {
	s := &Scope{Name: name, Record: record[name]}
	for _, rs := range rules {
		for _, r := range rs {
			if r.shared.IsWindow() && !slices.Contains(s.Windows, r.shared) {
				s.Windows = append(s.Windows, r.shared)
			}
		}
	}
	if len(s.Windows) == 0 {
		return nil
	}
	s.Record.Scope = name
	s.Mark = ratelimit.NewMark(s.prefix()+"record", level)
	return s
}

// prefix is the start of every key of the scope.
func (s *Scope) prefix() string { return "{" + s.Name + "}:" }

// appendMark appends the check of the scope's mark at the record's version; nothing for a nil
// scope.
func (s *Scope) appendMark(dst []ratelimit.Check) []ratelimit.Check {
	if s == nil {
		return dst
	}
	return append(dst, ratelimit.Check{Limit: s.Mark, Cost: s.Record.Version})
}

// Seeds are what the record holds of the scope's windows, to re-seed a store from. A window the
// record holds that the configuration no longer has is left out.
func (s *Scope) Seeds() []ratelimit.Seed {
	byKey := make(map[string]*ratelimit.Limit, len(s.Windows))
	for _, l := range s.Windows {
		byKey[l.Key] = l
	}
	var out []ratelimit.Seed
	for _, w := range s.Record.Windows {
		for key, used := range w.Used {
			if l := byKey[s.prefix()+key]; l != nil {
				out = append(out, ratelimit.Seed{Limit: l, End: w.EndsAt.Time, Used: used})
			}
		}
	}
	return out
}

// Recorded is the scope as a snapshot of the store read it, for the record: its windows that hold
// something, grouped by when they end, each by its key less the scope's prefix.
func (s *Scope) Recorded(st ratelimit.ScopeState) gatewayv1.ScopeRecord {
	out := gatewayv1.ScopeRecord{Scope: s.Name, Version: max(st.Version, 0), TakenAt: metav1.NewTime(st.At), Current: st.Current}
	byEnd := map[int64]int{}
	for _, w := range st.Windows {
		if w.Limit == nil {
			continue
		}
		i, ok := byEnd[w.End.Unix()]
		if !ok {
			i = len(out.Windows)
			byEnd[w.End.Unix()] = i
			out.Windows = append(out.Windows, gatewayv1.WindowsEnding{EndsAt: metav1.NewTime(w.End), Used: map[string]int64{}})
		}
		out.Windows[i].Used[strings.TrimPrefix(w.Limit.Key, s.prefix())] = w.Used
	}
	gatewayv1.SortWindows(out.Windows)
	return out
}

// The names of the scopes that are not a tenant's.
const globalScope = "sluice:global"

// tenantScope is the name of a tenant's scope.
func tenantScope(tenant string) string { return "tenant:" + tenant }

// recordByScope indexes a configuration's record by scope.
func recordByScope(record []gatewayv1.ScopeRecord) map[string]gatewayv1.ScopeRecord {
	out := make(map[string]gatewayv1.ScopeRecord, len(record))
	for _, s := range record {
		out[s.Scope] = s
	}
	return out
}

// Scopes returns every scope of the policy, by name.
func (p *Policy) Scopes() []*Scope {
	out := make([]*Scope, 0, len(p.scopes))
	for _, s := range p.scopes {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Scope) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ScopeOf returns the scope of a call's checks whose mark is mk, or nil.
func ScopeOf(c *Caller, r *Route, mk *ratelimit.Limit) *Scope {
	if s := c.Tenant.scope; s != nil && s.Mark == mk {
		return s
	}
	for _, s := range r.Provider.scopes {
		if s.Mark == mk {
			return s
		}
	}
	return nil
}

// addScope keeps s, unless it is nil.
func (p *Policy) addScope(s *Scope) *Scope {
	if s != nil {
		p.scopes[s.Name] = s
	}
	return s
}
