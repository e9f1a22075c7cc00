package overhead

import (
	"fmt"
	"sync"
	"time"
)

// rssInterval is how often a closed-loop step samples its target's
// resident memory: often enough that a step of a few seconds holds tens of
// samples, seldom enough that reading /proc costs the load's core nothing
// to speak of.
const rssInterval = 100 * time.Millisecond

// rssOf is the resident memory of a child, in bytes, or an error with the
// end of its log if it has exited.
func rssOf(c child) (int64, error) {
	select {
	case <-c.Exited():
		return 0, fmt.Errorf("overhead: process %d exited:\n%s", c.Pid(), c.Log())
	default:
	}
	return residentMemory(c.Pid())
}

// rssWatch samples a process's resident memory every rssInterval, keeping
// the most, until stopped.
type rssWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	peak int64
}

// watchRSS starts sampling the resident memory of c.
func watchRSS(c child) *rssWatch {
	w := &rssWatch{done: make(chan struct{})}
	w.wg.Go(func() {
		tick := time.NewTicker(rssInterval)
		defer tick.Stop()
		for {
			w.sample(c)
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	})
	return w
}

// sample keeps c's resident memory if it is the most so far. A sample that
// cannot be read, the process having exited, is skipped: the step's CPU
// time reports the exit.
func (w *rssWatch) sample(c child) {
	rss, err := rssOf(c)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.peak = max(w.peak, rss)
	w.mu.Unlock()
}

// stop takes a last sample, stops sampling and returns the most sampled;
// zero if none could be read.
func (w *rssWatch) stop() int64 {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}
