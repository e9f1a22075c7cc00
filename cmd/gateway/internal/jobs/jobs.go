// Package jobs keeps the gateway's jobs: calls sent to POST /v1/jobs that nobody waits for. A job
// is queued, taken by a worker for an attempt (running), and ends succeeded, failed or cancelled.
// An attempt that fails in a way another may not (a 429, a 5xx, a provider that did not answer)
// puts the job back in the queue until its last attempt, after which it fails with its error.
//
// Memory keeps jobs in one process; they do not survive a restart. Redis keeps them in a Redis
// Stream read by a consumer group, shared by every replica: a job is delivered at least once, and
// a job held by a replica that died is reclaimed (XAUTOCLAIM) by another once it has been idle
// for the reclaim time.
//
// The state machine (Job.apply) is pure and shared by both stores.
package jobs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is where a job is in its life.
type State string

// The states. Succeeded, Failed and Cancelled are final.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// States lists every state, in the order of a job's life.
var States = []State{Queued, Running, Succeeded, Failed, Cancelled}

// Known reports whether s is one of States.
func (s State) Known() bool { return slices.Contains(States, s) }

// Final reports whether a job in state s stays there.
func (s State) Final() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Errors callers branch on.
var (
	// ErrNotFound: no such job, or it has expired.
	ErrNotFound = errors.New("jobs: no such job")
	// ErrFinished: the job is already final, so the change does not apply.
	ErrFinished = errors.New("jobs: the job has already finished")
	// ErrNotRunning: the attempt is not the one the job is running. It happens when a replica
	// that stalled past the reclaim time ends its attempt after another replica reclaimed the
	// job: the late attempt's end and what it holds are not recorded.
	ErrNotRunning = errors.New("jobs: the job is not running this attempt")
	// ErrTooManyQueued: the tenant has as many jobs queued as it may.
	ErrTooManyQueued = errors.New("jobs: the tenant has too many jobs queued")
)

// Job is one job. Its request is kept as sent, with the SHA-256 of the key that sent it (never
// the key), which names its caller when it runs.
type Job struct {
	ID       string    `json:"id"`
	Tenant   string    `json:"tenant"`
	KeyHash  string    `json:"keyHash"`
	Endpoint string    `json:"endpoint"`
	Body     []byte    `json:"body"`
	State    State     `json:"state"`
	Attempts int       `json:"attempts"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	// Error is why the last attempt failed; when the job has failed, why it did.
	Error string `json:"error,omitempty"`
	// Status and Result are the provider's answer to the attempt that succeeded.
	Status int    `json:"status,omitempty"`
	Result []byte `json:"result,omitempty"`
	// Held is the estimate an attempt took from the limits and has not settled yet. An attempt
	// that finds it left by an earlier one (whose replica died) gives it back.
	Held Cost `json:"held,omitzero"`
	// Charged is true once an attempt's cost has been settled: the job's id is its idempotency
	// key, so a job delivered twice is charged once.
	Charged bool `json:"charged,omitempty"`
}

// Cost is what a call took from the limits.
type Cost struct {
	Tokens       int64 `json:"tokens,omitempty"`
	MicroDollars int64 `json:"microDollars,omitempty"`
}

// NewID returns a new job id.
func NewID() string { return "job_" + rand.Text() }

// Attempt names one attempt of a job: its id and its number, Job.Attempts when it was taken.
// Once another replica has taken the job over, an earlier attempt changes nothing but the job's
// charge.
type Attempt struct {
	Job string
	N   int
}

// Attempt returns the attempt that j, as taken, is.
func (j *Job) Attempt() Attempt { return Attempt{Job: j.ID, N: j.Attempts} }

// runs checks that j is running attempt a.
func (j *Job) runs(a Attempt) error {
	switch {
	case j.State.Final():
		return ErrFinished
	case j.State != Running || j.Attempts != a.N:
		return fmt.Errorf("jobs: job %s is %s at attempt %d, not running attempt %d: %w", j.ID, j.State, j.Attempts, a.N, ErrNotRunning)
	}
	return nil
}

// hold records what attempt a holds.
func (j *Job) hold(a Attempt, held Cost) error {
	if err := j.runs(a); err != nil {
		return err
	}
	j.Held = held
	return nil
}

// charge marks j charged and reports whether it was the first time. When a is the job's latest
// attempt, what it held is settled.
func (j *Job) charge(a Attempt) (first bool) {
	first, j.Charged = !j.Charged, true
	if j.Attempts == a.N {
		j.Held = Cost{}
	}
	return first
}

// Outcome is how an attempt ended.
type Outcome struct {
	// Status and Result are the provider's answer when the attempt succeeded.
	Status int
	Result []byte
	// Err is why the attempt failed; empty when it succeeded.
	Err string
	// Retry says whether another attempt may succeed where this one failed.
	Retry bool
}

// event is what happens to a job.
type event uint8

const (
	take event = iota + 1 // a worker takes it for an attempt
	finish
	cancel
)

// apply changes j by e at now; a finish is attempt a's. maxAttempts bounds the attempts: a job
// taken when it has had them all (its last attempt died with its replica) fails instead. A
// change to a final job is ErrFinished; the finish of an attempt the job is not running is
// ErrNotRunning.
func (j *Job) apply(e event, a Attempt, o Outcome, maxAttempts int, now time.Time) error {
	if j.State.Final() {
		return ErrFinished
	}
	switch e {
	case take:
		j.takeAt(maxAttempts)
	case finish:
		if err := j.runs(a); err != nil {
			return err
		}
		j.finish(o, maxAttempts)
	case cancel:
		j.State = Cancelled
	}
	j.Updated = now
	return nil
}

func (j *Job) takeAt(maxAttempts int) {
	if j.Attempts >= maxAttempts {
		// Only a job whose last attempt died with its replica is taken again with none left.
		j.State = Failed
		j.Error = fmt.Sprintf("gave up after %d attempts; the last ended without an answer (its gateway stopped)", j.Attempts)
		return
	}
	if j.State == Running {
		j.Error = "the previous attempt ended without an answer (its gateway stopped)"
	}
	j.State = Running
	j.Attempts++
}

func (j *Job) finish(o Outcome, maxAttempts int) {
	switch {
	case o.Err == "":
		j.State, j.Status, j.Result, j.Error = Succeeded, o.Status, o.Result, ""
	case o.Retry && j.Attempts < maxAttempts:
		j.State, j.Error = Queued, o.Err
	case o.Retry:
		j.State, j.Error = Failed, fmt.Sprintf("gave up after %d attempts; the last: %s", j.Attempts, o.Err)
	default:
		j.State, j.Error = Failed, o.Err
	}
}

// Options configures a store.
type Options struct {
	// MaxAttempts is the most attempts per job. Values below 1 mean 1.
	MaxAttempts int
	// ReclaimAfter is how long a job waits after a failed attempt, or after its holder stopped
	// renewing it, before it is taken again. Zero means a minute.
	ReclaimAfter time.Duration
	// ResultTTL is how long a final job can be read. Zero means a day.
	ResultTTL time.Duration
	// MaxQueuedPerTenant is the most jobs a tenant may have queued; Add refuses more with
	// ErrTooManyQueued. Zero means 10,000.
	MaxQueuedPerTenant int
	// Now returns the time. Nil means time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	o.MaxAttempts = max(o.MaxAttempts, 1)
	if o.ReclaimAfter <= 0 {
		o.ReclaimAfter = time.Minute
	}
	if o.ResultTTL <= 0 {
		o.ResultTTL = 24 * time.Hour
	}
	if o.MaxQueuedPerTenant <= 0 {
		o.MaxQueuedPerTenant = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// ListLimit is the most jobs List returns: the newest.
const ListLimit = 100

// Superseded reports whether err says that a job is no longer an attempt's to run: another
// gateway took it over, or it was cancelled, or it expired.
func Superseded(err error) bool {
	return errors.Is(err, ErrNotRunning) || errors.Is(err, ErrFinished) || errors.Is(err, ErrNotFound)
}
