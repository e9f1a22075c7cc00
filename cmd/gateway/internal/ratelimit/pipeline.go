package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// maxBatches is how many batches of script runs are on the wire at once.
	maxBatches = 2
	// maxBatch caps the runs sent in one batch.
	maxBatch = 64
	// callerWait is how long a caller waits for its run's answer, unless its context ends first: a
	// stalled Redis fails decisions as soon as a read timeout of ClientOptions would.
	callerWait = 500 * time.Millisecond
	// watchEvery is how often the pipeline looks for callers that have waited callerWait, while
	// any wait: a caller leaves between callerWait and callerWait + watchEvery after it came.
	watchEvery = callerWait / 5
	// scriptTimeout is how long the pipeline waits for a script run's answer, however soon its
	// callers leave: only the answer tells whether a decision whose caller left took anything.
	scriptTimeout = 30 * time.Second
)

// errNoAnswer is what a caller gets when Redis has not answered its run within callerWait.
var errNoAnswer = errors.New("no answer from Redis in time")

// pipeline sends the runs of concurrent callers together: while a batch is on the wire, the runs
// that arrive wait and go in the next one. On one primary the runs of a batch on one clock go in
// one script run; on Redis Cluster, those whose keys share a hash tag do, and a run over several
// hash tags is sent as one part per hash tag (see splitByHashTag). A script run evaluates its runs
// in turn, each atomically, on one clock, and reads and writes the keys they have in common once.
// It is safe for concurrent use.
//
// A caller that stops waiting (its context ended, or callerWait passed: see watch) leaves its run: a run left
// before it was sent is never sent, and a decision left after is given back once its answer says
// it was allowed, so that a caller that got an error was charged nothing. The pipeline waits up to
// scriptTimeout for every answer (on Redis Cluster, up to the client's read timeout); only a run
// whose answer never comes (the connection broke) has an outcome nobody knows, and then what it
// took stays taken: the limits err on the safe side, and a lease frees itself when it expires.
// No script run is ever sent twice by the client (scriptCmd).
type pipeline struct {
	client redis.UniversalClient // with the read timeout scriptTimeout, where the client allows it
	// sharded is true when a script run may touch one slot only: on Redis Cluster (or a Ring),
	// anything but one primary.
	sharded bool

	mu      sync.Mutex
	pending []*scriptRun
	batches int                      // on the wire
	onWire  [maxBatches][]*scriptRun // each sender's batch on the wire
	// watching is true while watch looks after the callers waiting; run wakes it when false.
	watching bool
	busy     sync.WaitGroup // batches on the wire or waiting to go
	// ready holds a token for each batch that may go, which one of the senders takes.
	ready chan struct{}
	// wake tells watch that callers wait again.
	wake        chan struct{}
	sendersOnce sync.Once
}

// The states of a run.
const (
	waiting   int32 = iota // in pending
	sent                   // on the wire, its caller waiting
	answered               // its caller has its answer
	abandoned              // its caller stopped waiting, or was told there was no answer in time
)

// scriptRun is one caller's decision, settlement or renewal, and its answer once done is closed;
// or one part of it, or the undo of a decision.
type scriptRun struct {
	clock string // now in microseconds, or "" for Redis's own clock
	mode  string // "decide", "settle", "undo" or "renew"
	keys  []string
	args  []any  // five per key: kind, capacity, p1, p2, cost
	id    string // a settlement's id, or ""
	mark  string // a settlement's record that it was applied, or ""
	keep  int64  // how long Redis keeps mark, in milliseconds
	reply []int64
	err   error
	// done is closed once its caller may stop waiting: when it was answered, or when it had waited
	// callerWait.
	done  chan struct{}
	since time.Time // when its caller came
	state atomic.Int32
	// parts are the runs a run over several hash tags is sent as on Redis Cluster, one per hash
	// tag; nil when it is sent whole.
	parts []*scriptRun
	// checks holds, in a part, the index of each of its checks in its whole run.
	checks []int
}

// newPipeline returns a pipeline that sends its runs to client. On a *redis.Client (one primary)
// it waits up to scriptTimeout for their answers; a cluster client keeps its own read timeout,
// since it cannot lend the pipeline a longer one without a pool of connections of its own.
func newPipeline(client redis.UniversalClient) *pipeline {
	if c, ok := client.(*redis.Client); ok {
		return &pipeline{client: c.WithTimeout(scriptTimeout)}
	}
	return &pipeline{client: client, sharded: true}
}

// run sends r and returns its reply. If ctx ends or callerWait passes first, run returns an error
// and r takes nothing (see pipeline).
func (p *pipeline) run(ctx context.Context, r *scriptRun) ([]int64, error) {
	r.done, r.since = make(chan struct{}), time.Now()
	p.startSenders()
	p.mu.Lock()
	p.pending = append(p.pending, r)
	send := p.batches < maxBatches
	if send {
		p.batches++
		p.busy.Add(1)
	}
	wake := !p.watching
	p.watching = true
	p.mu.Unlock()
	if wake {
		p.wake <- struct{}{} // never blocks: watch is told once each time it stops watching
	}
	if send {
		p.ready <- struct{}{}
	}
	select {
	case <-r.done:
		return r.result()
	case <-ctx.Done():
		return r.leave(ctx.Err())
	}
}

// result is r's answer once done is closed: its reply, or errNoAnswer when watch ended its wait.
func (r *scriptRun) result() ([]int64, error) {
	if r.state.Load() == abandoned {
		return nil, errNoAnswer
	}
	return r.reply, r.err
}

// leave stops waiting for r with err, unless r's wait ended first.
func (r *scriptRun) leave(err error) ([]int64, error) {
	if r.state.CompareAndSwap(waiting, abandoned) || r.state.CompareAndSwap(sent, abandoned) {
		return nil, err
	}
	<-r.done
	return r.result()
}

// deliver tells r's caller that r has its answer, unless the caller has left, and reports whether
// it had.
func (r *scriptRun) deliver() (left bool) {
	if !r.state.CompareAndSwap(sent, answered) {
		return true
	}
	close(r.done)
	return false
}

// giveUp ends the wait of r's caller with errNoAnswer once it has waited callerWait by now, and
// reports whether r is still to be answered or given up.
func (r *scriptRun) giveUp(now time.Time) (outstanding bool) {
	state := r.state.Load()
	if state != waiting && state != sent {
		return false
	}
	if now.Sub(r.since) >= callerWait && r.state.CompareAndSwap(state, abandoned) {
		close(r.done)
		return false
	}
	return true
}

// watch ends, every watchEvery while callers wait, the waits of those that have waited
// callerWait: one goroutine looks after every caller, where a timer each would cost every
// decision. It sleeps while no caller waits.
func (p *pipeline) watch() {
	for range p.wake {
		for {
			time.Sleep(watchEvery)
			if !p.giveUpLate(time.Now()) {
				break
			}
		}
	}
}

// giveUpLate gives up the runs, waiting or on the wire, whose callers have waited callerWait by
// now, and reports whether any other run is still to be answered; if none is, watching stops.
func (p *pipeline) giveUpLate(now time.Time) (outstanding bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.pending {
		outstanding = r.giveUp(now) || outstanding
	}
	for _, batch := range p.onWire {
		for _, r := range batch {
			outstanding = r.giveUp(now) || outstanding
		}
	}
	p.watching = outstanding
	return outstanding
}

// startSenders starts, once, the pipeline's maxBatches senders, goroutines that live as long as
// the process and send a batch each time ready says one may go, and its watch. A sender of its
// own per batch would cost a fresh goroutine's stack growing, at every batch, to the depth of a
// round trip.
//
// A sender yields once before it takes a batch, so that the callers it has just answered, and
// any other goroutine ready to run, may add their runs to it first: a batch that waited one turn
// of the scheduler carries more runs per round trip.
func (p *pipeline) startSenders() {
	p.sendersOnce.Do(func() {
		p.ready, p.wake = make(chan struct{}, maxBatches), make(chan struct{}, 1)
		for sender := range maxBatches {
			go func() {
				for range p.ready {
					runtime.Gosched()
					p.sendPending(sender)
				}
			}()
		}
		go p.watch()
	})
}

// sendPending sends one batch of the runs waiting, as sender's batch on the wire, and hands what
// is left to another sender, so that no batch waits for another.
func (p *pipeline) sendPending(sender int) {
	defer p.busy.Done()
	p.mu.Lock()
	n := min(len(p.pending), maxBatch)
	batch := claim(p.pending[:n:n])
	p.pending = p.pending[n:]
	p.onWire[sender] = batch
	p.mu.Unlock()
	if len(batch) > 0 {
		p.send(batch)
	}
	p.mu.Lock()
	p.onWire[sender] = nil
	more := len(p.pending) > 0
	if more {
		p.busy.Add(1)
	} else {
		p.batches--
	}
	p.mu.Unlock()
	if more {
		p.ready <- struct{}{} // never blocks: at most maxBatches batches are ready or on the wire
	}
}

// claim marks the runs of batch sent and returns them, without those their callers left.
func claim(batch []*scriptRun) []*scriptRun {
	kept := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(waiting, sent) {
			kept = append(kept, r)
		}
	}
	return kept
}

// send runs a batch in one round trip. A call that Redis refuses is sent again with each of its
// runs alone, so that one bad run fails only its own caller: the script writes nothing until
// every run has been evaluated, so the runs did not happen. A decision sent in parts is undone
// where it took when another part refused or failed, before its caller hears. Then the decisions
// allowed for callers that left are given back.
func (p *pipeline) send(batch []*scriptRun) {
	// The batch serves several callers: none of their contexts may cancel it. scriptTimeout
	// bounds it.
	ctx := context.Background()
	calls := p.group(p.split(batch))
	p.execLoading(ctx, calls)
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
	var undo []*scriptRun
	for _, r := range batch {
		if r.parts != nil {
			if r.join(); !r.allowed() {
				undo = r.undo(undo)
			}
		}
	}
	p.execUndo(ctx, undo)
	undo = undo[:0]
	for _, r := range batch {
		if r.deliver() && r.allowed() {
			undo = r.undo(undo)
		}
	}
	p.execUndo(ctx, undo)
}

// execUndo sends the undos of decisions. An undo that fails leaves the decision taken: the limits
// err on the safe side.
func (p *pipeline) execUndo(ctx context.Context, undo []*scriptRun) {
	if len(undo) > 0 {
		p.execLoading(ctx, p.group(undo))
	}
}

// execLoading sends calls as exec does, and once more those Redis answered NOSCRIPT (it lost the
// script, so they did not run) after loading it. If the script cannot be loaded, they fail with
// the reason.
func (p *pipeline) execLoading(ctx context.Context, calls []*scriptCall) {
	p.exec(ctx, calls)
	if lost := withoutScript(calls); len(lost) > 0 {
		if err := decideScript.Load(ctx, p.client).Err(); err != nil {
			for _, c := range lost {
				c.cmd.SetErr(err)
			}
			return
		}
		p.exec(ctx, lost)
	}
}

// exec sends each call, read as integers without boxing each one.
func (p *pipeline) exec(ctx context.Context, calls []*scriptCall) {
	pipe := p.client.Pipeline()
	for _, c := range calls {
		c.cmd = redis.NewIntSliceCmd(ctx, c.args...)
		_ = pipe.Process(ctx, scriptCmd{c.cmd}) // queued; its error comes with Exec
	}
	_, _ = pipe.Exec(ctx) // each command holds its own error
}

// scriptCmd is a script run's command, which the client never sends twice, whatever its retries:
// a run whose answer was lost may have taken, and sent again would take twice. (A redirect on
// Redis Cluster is still followed: a redirected command did not run.)
type scriptCmd struct{ *redis.IntSliceCmd }

// NoRetry tells the client not to send the command again.
func (scriptCmd) NoRetry() bool { return true }

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

// scriptCall is one script run: runs of a batch that may share it (see pipeline.group), and its
// EVALSHA command's arguments.
type scriptCall struct {
	runs []*scriptRun
	args []any
	cmd  *redis.IntSliceCmd
}

// group puts runs in calls, keeping their order: on one primary, every run in one call; when
// sharded, the runs whose keys have the same hash tag (split has made each run's keys share
// one), since a script run may touch one Redis Cluster slot only. Runs on callers' clocks (tests)
// share a call only with runs on the same clock. Every run has a key.
func (p *pipeline) group(runs []*scriptRun) []*scriptCall {
	if len(runs) == 1 {
		return groupEach(runs)
	}
	var groups []string
	byGroup := make(map[string][]*scriptRun, 1)
	for _, r := range runs {
		group := r.clock
		if p.sharded {
			group += "/" + hashTag(r.keys[0])
		}
		if _, ok := byGroup[group]; !ok {
			groups = append(groups, group)
		}
		byGroup[group] = append(byGroup[group], r)
	}
	calls := make([]*scriptCall, len(groups))
	for i, group := range groups {
		calls[i] = newScriptCall(byGroup[group])
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
// then per run its clock, mode, number of checks, the position of its settlement mark (0: none)
// and how long to keep it, and per check the position of its key (from 1, as in Lua) and its five
// values.
func newScriptCall(runs []*scriptRun) *scriptCall {
	index := make(map[string]int, len(runs[0].keys))
	var keys []any
	size := 3
	for _, r := range runs {
		size += 5 + 6*len(r.keys)
		for _, key := range r.keys {
			keys = appendKey(keys, index, key)
		}
		if r.mark != "" {
			keys = appendKey(keys, index, r.mark)
		}
	}
	args := make([]any, 0, size+len(keys))
	args = append(args, "evalsha", decideScript.Hash(), len(keys))
	args = append(args, keys...)
	for _, r := range runs {
		args = append(args, r.clock, r.mode, len(r.keys), index[r.mark], r.keep)
		for i, key := range r.keys {
			args = append(args, index[key])
			args = append(args, r.args[5*i:5*i+5]...)
		}
	}
	return &scriptCall{runs: runs, args: args}
}

// appendKey appends key to keys unless index holds it, and records its position (from 1).
func appendKey(keys []any, index map[string]int, key string) []any {
	if _, ok := index[key]; ok {
		return keys
	}
	keys = append(keys, key)
	index[key] = len(keys)
	return keys
}

// answer gives each run its part of the reply (a decision's 5+2n values, a settlement's or a
// renewal's none), or the call's error.
func (c *scriptCall) answer() {
	reply, err := c.cmd.Result()
	if want := c.replyLen(); err == nil && len(reply) != want {
		err = fmt.Errorf("ratelimit: the decision script answered %d values, not %d", len(reply), want)
	}
	for _, r := range c.runs {
		r.reply, r.err = nil, err
		if err == nil {
			n := r.replyLen()
			r.reply, reply = reply[:n:n], reply[n:]
		}
	}
}

// allowed reports whether r is a decision that was answered allowed, and so took.
func (r *scriptRun) allowed() bool {
	return r.mode == "decide" && r.err == nil && len(r.reply) > 0 && r.reply[0] == 1
}

// undo appends to dst the runs that give back what decision r took: every cost, and its leases;
// from a window, only while the window it took from lasts; from a rolling window, only to the
// slot it took from, while that slot still counts (see decide.lua). A decision sent in parts is
// undone in each part that took.
func (r *scriptRun) undo(dst []*scriptRun) []*scriptRun {
	if r.parts != nil {
		for _, part := range r.parts {
			if part.allowed() {
				dst = part.undo(dst)
			}
		}
		return dst
	}
	args := slices.Clone(r.args)
	now := r.reply[replyNow]
	for i := range r.keys {
		check := args[5*i : 5*i+5]
		check[4] = -check[4].(int64)
		switch check[0] {
		case "w": // the end of the window it took from: the window's reset, after the decision
			end := now + r.reply[remainingAt(i)+1]
			check[2], check[3] = end, end
		case "r": // when the decision was taken, which names the slot it took from
			check[3] = now
		}
	}
	return append(dst, &scriptRun{clock: r.clock, mode: "undo", keys: r.keys, args: args})
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
		return replyHeader + replyPerCheck*len(r.keys)
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
