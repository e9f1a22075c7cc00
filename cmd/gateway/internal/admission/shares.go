package admission

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
)

const (
	// shareEvery is how often a dispatcher exchanges with the gateways sharing its provider what
	// each lane was served, while few lanes wait; shareSlack is how far, in tokens (over the
	// tenant's weight), a lane may get ahead of the least served lane of its group before it is
	// held back: one of the fair queue's rounds, more than a gateway serves between two exchanges.
	shareEvery = 200 * time.Millisecond
	shareSlack = 8192
	// gatewaySlackIntervals is how far, in exchange intervals of the provider's drain, a gateway
	// may get ahead of the least served gateway before it is held back: what the least served
	// one serves between its last exchange and this one's, which this one cannot know of yet. A
	// lane's slack is a round of the fair queue; a gateway's is a fraction of a second of the
	// provider, so that the gateways keep their shares of it from one second to the next and a
	// door's estimate of its own queue's drain holds for the wait. With a round's slack, the
	// gateways' shares swung by a fifth over a few seconds, and the lab's queue case had one
	// page in eight wait more than 15% off its estimate.
	gatewaySlackIntervals = 2
	// sharePerLane spaces exchanges further apart as more lanes wait: an exchange costs Redis
	// about 11 µs a lane (BenchmarkSharesExchangeAtScale), so one every 100 µs a lane keeps each
	// gateway's exchanges to about a tenth of Redis's time, however many tenants wait.
	sharePerLane = 100 * time.Microsecond
	// shareWordHolds is how many of its exchange intervals a gateway's word that a lane waits
	// holds: a gateway that died stops holding the others' lanes back after it.
	shareWordHolds = 10
)

// exchangeShares tells the gateways sharing the provider, every shareInterval until ctx ends (and
// a quarter of one after the last when an Interactive tenant starts waiting here), what this one
// served and which of its lanes wait, and takes in what they all served: the queue then holds
// back a lane that got ahead of its fair share. An exchange that fails forgets what
// the others served, so that no lane is held on old news.
func (d *dispatcher) exchangeShares(ctx context.Context) {
	t := time.NewTimer(shareEvery)
	defer t.Stop()
	interval, last := shareEvery, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.exchangeSoon: // no sooner than a quarter of an interval after the last
			if wait := time.Until(last.Add(interval / 4)); wait > 0 {
				t.Reset(wait)
				continue
			}
		}
		interval, last = d.exchangeOnce(ctx), time.Now()
		t.Reset(interval)
	}
}

// shareInterval is the time between two exchanges of lanes lanes.
func shareInterval(lanes int) time.Duration {
	return max(shareEvery, time.Duration(lanes)*sharePerLane)
}

// exchangeOnce makes one exchange and returns the time until the next (see shareInterval).
func (d *dispatcher) exchangeOnce(ctx context.Context) time.Duration {
	d.mu.Lock()
	now := d.g.now()
	ups, mine := d.shares.Updates(d.waitingLanes(now)), d.q.Backlog(now)
	idle := len(ups) == 0 && !mine.Waiting() && !d.elsewhere.anyWaits()
	if idle {
		d.setElsewhere(elsewhereNews{})
	}
	d.mu.Unlock()
	interval := shareInterval(len(ups))
	if idle {
		return interval
	}
	ctx, cancel := context.WithTimeout(ctx, decideTimeout)
	st, elsewhere, err := d.g.opts.Shares.Exchange(ctx, d.provider, ups, mine, shareWordHolds*interval)
	cancel()
	d.mu.Lock()
	if err != nil {
		d.g.log.Debug("exchange the queue's shares with the other gateways; the queue is served as if alone meanwhile", "provider", d.provider, "err", err)
		d.shares.Forget()
		d.setElsewhere(elsewhereNews{})
	} else {
		d.shares.Took(ups, st)
		d.setElsewhere(elsewhereNews{known: true, mine: mine, others: elsewhere})
	}
	d.shares.SetGatewaySlack(d.gatewaySlack(interval))
	d.mu.Unlock()
	d.kick() // a lane held back may go now
	return interval
}

// gatewaySlack is how far a gateway may get ahead of the least served gateway, in tokens over its
// share of the provider, when exchanges are interval apart: gatewaySlackIntervals of them of what
// the provider's token limits let through while its queue's backlog lasts (a lane's slack for a
// provider with none). The caller holds d.mu.
func (d *dispatcher) gatewaySlack(interval time.Duration) float64 {
	p := d.g.policy().Provider(d.provider)
	if p == nil {
		return shareSlack
	}
	rate := sustained(p, d.backlog)
	if rate <= 0 {
		return shareSlack
	}
	return gatewaySlackIntervals * interval.Seconds() * rate
}

// waitingLanes are the shared ledger's members of the queue's lanes that wait and that no limit of
// their own blocks at now, and the share of the provider they are owed. The caller holds d.mu.
func (d *dispatcher) waitingLanes(now time.Time) (map[fairshare.Member]bool, float64) {
	waiting, share := map[fairshare.Member]bool{}, 0.0
	d.q.Open(now, func(it *fairqueue.Item) {
		waiting[fairshare.ClassOf(it)] = true
		waiting[fairshare.TenantOf(it)] = true
		waiting[fairshare.UserOf(it)] = true
		share += d.shares.Owed(it)
	})
	return waiting, share
}

// elsewhereNews is what the last exchange said waits for the provider on this gateway and on
// each other one; none known when there was none, it failed, or nothing waited anywhere.
type elsewhereNews struct {
	known  bool
	mine   fairqueue.Backlog
	others []fairqueue.Backlog
}

// anyWaits reports whether the last exchange knew of calls waiting on some gateway: until one says
// none does, the exchanges go on, so that the door hears when the others' backlogs are done.
func (e elsewhereNews) anyWaits() bool { return e.known && (e.mine.Waiting() || len(e.others) > 0) }

// setElsewhere keeps news of what waits on the gateways, for the door's estimates. The caller
// holds d.mu.
func (d *dispatcher) setElsewhere(news elsewhereNews) {
	d.elsewhere = news
	d.q.SetElsewhere(news.others)
}
