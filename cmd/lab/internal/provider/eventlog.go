package provider

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// eventLog keeps the events of a streamed background response, in order,
// for the streams that follow it: the one that created it and any that
// resume it. Create it with newEventLog. It is safe for concurrent use.
type eventLog struct {
	mu     sync.Mutex
	events []openai.Event // the event of sequence number i at i
	ended  bool
	grew   chan struct{} // closed, and replaced, when an event comes or the log ends
}

func newEventLog() *eventLog { return &eventLog{grew: make(chan struct{})} }

// add appends ev, which must carry the next sequence number. It never
// fails: its error is for an emitter's signature.
func (l *eventLog) add(ev openai.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	l.wake()
	return nil
}

// end says no event will follow.
func (l *eventLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	l.wake()
}

func (l *eventLog) wake() {
	close(l.grew)
	l.grew = make(chan struct{})
}

// since is the events from the n-th on, whether the log has ended, and a
// channel closed when it changes next.
func (l *eventLog) since(n int) ([]openai.Event, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.events))
	return l.events[n:len(l.events):len(l.events)], l.ended, l.grew
}

// follow sends the events after sequence number after (-1 for all), those
// kept and then those to come, until the log ends. It stops early with the
// error of send, or of ctx when it ends.
func (l *eventLog) follow(ctx context.Context, after int64, send func(openai.Event) error) error {
	next := int(max(after+1, 0))
	for {
		events, ended, grew := l.since(next)
		for _, ev := range events {
			if err := send(ev); err != nil {
				return err
			}
		}
		next += len(events)
		if ended {
			return nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
