package admission

import (
	"sync"
	"time"
)

// renewals keeps the running calls that hold slots in flight and renews each one's slots every
// renewEvery while it runs. One goroutine of the gate looks for the calls due every renewLook,
// in place of a timer armed and stopped for each call: a call's slots are renewed between
// renewEvery and renewEvery+renewLook after they were taken or last renewed, well within the
// lease they have. It is safe for concurrent use.
type renewals struct {
	start   sync.Once
	mu      sync.Mutex
	running map[*Ticket]time.Time // when each call's slots were taken or last renewed
}

// renewLook is how often the gate looks for the calls whose slots are due for renewal.
const renewLook = renewEvery / 2

// add keeps t's slots renewed from now on, until remove; the first call starts the gate's
// renewing goroutine.
func (r *renewals) add(g *Gate, t *Ticket, now time.Time) {
	r.start.Do(func() { go g.renewSlots() })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		r.running = make(map[*Ticket]time.Time)
	}
	r.running[t] = now
}

// remove stops renewing t's slots.
func (r *renewals) remove(t *Ticket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, t)
}

// due returns the calls whose slots are due for renewal at now, counted as renewed at now.
func (r *renewals) due(now time.Time) []*Ticket {
	r.mu.Lock()
	defer r.mu.Unlock()
	var due []*Ticket
	for t, last := range r.running {
		if now.Sub(last) >= renewEvery {
			due = append(due, t)
			r.running[t] = now
		}
	}
	return due
}

// renewSlots renews the slots of the calls due, every renewLook, until the gate closes. Each
// renewal runs on its own, so that a store slow to answer one holds up no other.
func (g *Gate) renewSlots() {
	tick := time.NewTicker(renewLook)
	defer tick.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-tick.C:
			for _, t := range g.renewals.due(g.now()) {
				go t.renew()
			}
		}
	}
}
