package server

import (
	"fmt"
	"net/http"
	"sync"
)

// maxLostJobs bounds the lost jobs a gateway remembers having counted: past it the oldest is
// forgotten, and counted again should it be noticed again.
const maxLostJobs = 4096

// lostJobs are the latest lost jobs this gateway noticed, so that each is counted and logged
// once however often it is polled. The zero value is ready to use; it is safe for concurrent use.
type lostJobs struct {
	mu    sync.Mutex
	seen  map[string]bool
	order []string // the ids in seen, oldest first
}

// first records a lost job's id and reports whether it was not recorded already.
func (l *lostJobs) first(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[id] {
		return false
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if len(l.order) == maxLostJobs {
		delete(l.seen, l.order[0])
		l.order = l.order[1:]
	}
	l.seen[id] = true
	l.order = append(l.order, id)
	return true
}

// jobLost counts and logs a job its store lost (jobs.ErrLost) the first time this gateway
// notices it: polled, cancelled, or running here.
func (s *Server) jobLost(id string) {
	if !s.lostJobs.first(id) {
		return
	}
	s.metrics.jobsLost.Inc()
	s.log.Warn("a job was lost with the jobs' store, which came back empty: it will not run or report, and its client is told to submit it again", "job", id)
}

// jobLostError is the answer about a job its store lost. The job's owner is lost with it, so
// the answer goes to whoever presents the id: it rests on the id alone (its epoch is not the
// store's), and says nothing of a job or a tenant that the id did not.
func jobLostError(id string) *apiError {
	return &apiError{status: http.StatusGone, Type: typeInvalidRequest, Code: "job_lost",
		Message: fmt.Sprintf("The job %q was accepted, but the gateway's job store has since lost it (the store came back empty or from an older snapshot). "+
			"It will not run or report: submit it again.", id)}
}
