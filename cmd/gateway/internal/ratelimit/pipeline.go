package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

const (
	// maxBatches is how many batches of script runs are on the wire at once.
	maxBatches = 2
	// maxBatch caps the runs sent in one batch.
	maxBatch = 64
)

// pipeline sends the runs of concurrent callers together: while a batch is on the wire, the runs
// that arrive wait and go in the next one. The runs of a batch whose keys share a hash tag go in
// one script run, which evaluates them in turn, each atomically, on one clock, and reads and
// writes the keys they have in common once. A caller alone goes at once. It is safe for
// concurrent use.
type pipeline struct {
	client redis.UniversalClient

	mu      sync.Mutex
	pending []*scriptRun
	batches int // on the wire
}

// scriptRun is one caller's decision or settlement, and its answer once done is closed.
type scriptRun struct {
	clock string // now in microseconds, or "" for Redis's own clock
	mode  string // "decide" or "settle"
	keys  []string
	args  []any // five per key: kind, capacity, p1, p2, cost
	reply []int64
	err   error
	done  chan struct{}
}

// run sends r and returns its reply. If ctx ends first, run returns ctx's error; the run may
// still happen, as with any command whose caller stops waiting.
func (p *pipeline) run(ctx context.Context, r *scriptRun) ([]int64, error) {
	r.done = make(chan struct{})
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

// send runs a batch in one round trip. The calls Redis answers NOSCRIPT (it lost the script) are
// sent again once it is loaded. A call that Redis refuses otherwise is sent again with each of
// its runs alone, so that one bad run fails only its own caller: the script writes nothing
// until every run has been evaluated, so the runs did not happen.
func (p *pipeline) send(batch []*scriptRun) {
	// The batch serves several callers: none of their contexts may cancel it. The client's own
	// timeouts bound it.
	ctx := context.Background()
	calls := groupByHashTag(batch)
	p.exec(ctx, calls)
	if lost := withoutScript(calls); len(lost) > 0 {
		if err := decideScript.Load(ctx, p.client).Err(); err != nil {
			finish(batch, err)
			return
		}
		p.exec(ctx, lost)
	}
	var again []*scriptCall
	for _, c := range calls {
		var refused redis.Error
		if errors.As(c.cmd.Err(), &refused) && len(c.runs) > 1 {
			again = append(again, groupEach(c.runs)...)
			continue
		}
		c.answer()
	}
	if len(again) > 0 {
		p.exec(ctx, again)
		for _, c := range again {
			c.answer()
		}
	}
}

// exec sends each call, read as integers without boxing each one.
func (p *pipeline) exec(ctx context.Context, calls []*scriptCall) {
	pipe := p.client.Pipeline()
	for _, c := range calls {
		c.cmd = redis.NewIntSliceCmd(ctx, c.args...)
		_ = pipe.Process(ctx, c.cmd) // queued; its error comes with Exec
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
}

// withoutScript returns the calls Redis answered NOSCRIPT.
func withoutScript(calls []*scriptCall) []*scriptCall {
	var lost []*scriptCall
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			lost = append(lost, c)
		}
	}
	return lost
}

func finish(batch []*scriptRun, err error) {
	for _, r := range batch {
		r.err = err
		close(r.done)
	}
}

// scriptCall is one script run: the runs of a batch whose keys share a hash tag, and its
// EVALSHA command's arguments.
type scriptCall struct {
	runs []*scriptRun
	args []any
	cmd  *redis.IntSliceCmd
}

// groupByHashTag puts the runs whose first keys have the same hash tag in one call, keeping their
// order, since a script run may touch one Redis Cluster slot only. Runs on callers' clocks
// (tests) share a call only with runs on the same clock. Every run has a key.
func groupByHashTag(batch []*scriptRun) []*scriptCall {
	if len(batch) == 1 {
		return groupEach(batch)
	}
	var tags []string
	byTag := make(map[string][]*scriptRun, 1)
	for _, r := range batch {
		tag := r.clock + "/" + hashTag(r.keys[0])
		if _, ok := byTag[tag]; !ok {
			tags = append(tags, tag)
		}
		byTag[tag] = append(byTag[tag], r)
	}
	calls := make([]*scriptCall, len(tags))
	for i, tag := range tags {
		calls[i] = newScriptCall(byTag[tag])
	}
	return calls
}

// groupEach gives each run a call of its own.
func groupEach(runs []*scriptRun) []*scriptCall {
	calls := make([]*scriptCall, len(runs))
	for i := range runs {
		calls[i] = newScriptCall(runs[i : i+1 : i+1])
	}
	return calls
}

// newScriptCall returns the call of these runs: EVALSHA of the script on their distinct keys,
// then per run its clock, mode and number of checks, and per check the position of its key
// (from 1, as in Lua) and its five values.
func newScriptCall(runs []*scriptRun) *scriptCall {
	index := make(map[string]int, len(runs[0].keys))
	var keys []any
	size := 3
	for _, r := range runs {
		size += 3 + 6*len(r.keys)
		for _, key := range r.keys {
			if _, ok := index[key]; !ok {
				keys = append(keys, key)
				index[key] = len(keys)
			}
		}
	}
	args := make([]any, 0, size+len(keys))
	args = append(args, "evalsha", decideScript.Hash(), len(keys))
	args = append(args, keys...)
	for _, r := range runs {
		args = append(args, r.clock, r.mode, len(r.keys))
		for i, key := range r.keys {
			args = append(args, index[key])
			args = append(args, r.args[5*i:5*i+5]...)
		}
	}
	return &scriptCall{runs: runs, args: args}
}

// answer hands each run its part of the reply: a decision's 4+2n values, a settlement's none.
func (c *scriptCall) answer() {
	reply, err := c.cmd.Result()
	if want := c.replyLen(); err == nil && len(reply) != want {
		err = fmt.Errorf("ratelimit: the decision script answered %d values, not %d", len(reply), want)
	}
	for _, r := range c.runs {
		if err != nil {
			r.err = err
		} else {
			n := r.replyLen()
			r.reply, reply = reply[:n:n], reply[n:]
		}
		close(r.done)
	}
}

func (c *scriptCall) replyLen() int {
	n := 0
	for _, r := range c.runs {
		n += r.replyLen()
	}
	return n
}

func (r *scriptRun) replyLen() int {
	if r.mode == "decide" {
		return 4 + 2*len(r.keys)
	}
	return 0
}

// hashTag returns the part of key that Redis Cluster hashes: the text inside the first {...}
// when it is not empty, or else the whole key.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}
