package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// A batch's lines in the gateway's queue run in the valleys of live load: a line waits, its
// attempt not counted, while this gateway's live calls in flight to its provider (calls a client
// waits for) hold batches.valleyPercent of the provider's maxInFlight. On a self-hosted server,
// whose calls slow one another as its batch fills, lines that filled its peaks would slow the
// live calls beside them; in its valleys they use what the live calls leave.

// valleyWait is how long a line that found its provider's live calls at their peak waits before
// it is taken again.
const valleyWait = 250 * time.Millisecond

// liveCalls counts this gateway's live calls in flight to each provider.
type liveCalls struct{ byProvider sync.Map } // provider name -> *atomic.Int64

// hold counts a live call in flight to provider until release is called.
func (l *liveCalls) hold(provider string) (release func()) {
	v, _ := l.byProvider.LoadOrStore(provider, new(atomic.Int64))
	n := v.(*atomic.Int64)
	n.Add(1)
	return func() { n.Add(-1) }
}

// of is how many live calls this gateway has in flight to provider.
func (l *liveCalls) of(provider string) int64 {
	if v, ok := l.byProvider.Load(provider); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// atPeak reports whether the live calls in flight to a provider hold batches.valleyPercent of its
// maxInFlight (after headroom), or more. A provider without maxInFlight is never at its peak.
func (s *Server) atPeak(provider string) bool {
	p := s.policy.Load()
	pr := p.Provider(provider)
	if pr == nil {
		return false
	}
	limit := pr.Config.WithHeadroom(pr.Config.MaxInFlight)
	return limit > 0 && s.live.of(provider)*100 >= limit*int64(p.Config.Batches.ValleyPercent)
}
