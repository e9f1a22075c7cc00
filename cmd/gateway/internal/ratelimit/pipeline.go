package ratelimit

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

const (
	// maxBatches is how many batches of script runs are on the wire at once.
	maxBatches = 2
	// maxBatch caps the script runs sent in one batch.
	maxBatch = 64
)

// pipeline sends the script runs of concurrent callers together: while a batch is on the wire,
// the runs that arrive wait and go in the next one, each still a script run of its own, decided
// alone and atomically. A caller alone goes at once. Under load this saves most of the system
// calls, on both sides, of a round trip per decision. It is safe for concurrent use.
type pipeline struct {
	client redis.UniversalClient

	mu      sync.Mutex
	pending []*scriptRun
	batches int // on the wire
}

// scriptRun is one caller's run of the decision script, and its answer once done is closed.
type scriptRun struct {
	keys  []string
	args  []any
	reply []int64
	err   error
	done  chan struct{}
}

// run runs the decision script and returns its reply. If ctx ends first, run returns ctx's
// error; the script may still run, as with any command whose caller stops waiting.
func (p *pipeline) run(ctx context.Context, keys []string, args []any) ([]int64, error) {
	r := &scriptRun{keys: keys, args: args, done: make(chan struct{})}
	p.mu.Lock()
	p.pending = append(p.pending, r)
	send := p.batches < maxBatches
	if send {
		p.batches++
	}
	p.mu.Unlock()
	if send {
		p.sendPending()
	}
	select {
	case <-r.done:
		return r.reply, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendPending sends one batch of the runs waiting, and hands what is left to a goroutine of its
// own, so that no caller waits for others' batches.
func (p *pipeline) sendPending() {
	p.mu.Lock()
	n := min(len(p.pending), maxBatch)
	batch := p.pending[:n:n]
	p.pending = p.pending[n:]
	p.mu.Unlock()
	p.send(batch)
	p.mu.Lock()
	more := len(p.pending) > 0
	if !more {
		p.batches--
	}
	p.mu.Unlock()
	if more {
		go p.sendPending()
	}
}

// send runs a batch in one round trip, loading the script first if Redis does not know it.
func (p *pipeline) send(batch []*scriptRun) {
	// The batch serves several callers: none of their contexts may cancel it. The client's own
	// timeouts bound it.
	ctx := context.Background()
	cmds := p.exec(ctx, batch)
	if hasNoScript(cmds) {
		if err := decideScript.Load(ctx, p.client).Err(); err != nil {
			finish(batch, nil, err)
			return
		}
		cmds = p.exec(ctx, batch)
	}
	finish(batch, cmds, nil)
}

func (p *pipeline) exec(ctx context.Context, batch []*scriptRun) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(batch))
	pipe := p.client.Pipeline()
	for i, r := range batch {
		cmds[i] = decideScript.EvalSha(ctx, pipe, r.keys, r.args...)
	}
	pipe.Exec(ctx) // each command holds its own error
	return cmds
}

func hasNoScript(cmds []*redis.Cmd) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// finish answers every run of a batch: with its command's reply, or with err for all.
func finish(batch []*scriptRun, cmds []*redis.Cmd, err error) {
	for i, r := range batch {
		if err != nil {
			r.err = err
		} else {
			r.reply, r.err = cmds[i].Int64Slice()
		}
		close(r.done)
	}
}
