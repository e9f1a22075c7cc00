// Package jobs keeps the gateway's jobs: calls sent to POST /v1/jobs that nobody waits for. A job
// is queued, taken by a worker for an attempt (running), and ends succeeded, failed or cancelled.
// An attempt that fails in a way another may not (a 429, a 5xx, a provider that did not answer)
// puts the job back in the queue until its last attempt, after which it fails with its error. An
// attempt refused by its own tenant's limits before anything went out is deferred: the job goes
// back to the queue, not counted, until the limit allows it, and its worker takes other work.
//
// Each tenant has its own queue, and takers go round the tenants with jobs that may go, one job
// each in turn: a tenant with many jobs delays another's by at most one job per worker. What a
// tenant keeps (the bodies of its unfinished jobs, the results of its finished ones) is bounded
// in count and in bytes.
//
// Memory keeps jobs in one process; they do not survive a restart. Redis keeps them in a Redis
// Stream per tenant, read by a consumer group, shared by every replica: a job is delivered at
// least once, and a job held by a replica that died is reclaimed by another once it has been
// idle for the reclaim time. A store names the jobs it adds, under its epoch (see epoch.go), so
// that a job it lost by coming back empty is told apart from one that never was: ErrLost.
//
// The state machine (Job.apply) is pure and shared by both stores.
package jobs

import (
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
	// ErrLost: the job was added under an earlier epoch of its store, which has since lost it
	// (it came back empty). It wraps ErrNotFound: what handles a missing job handles a lost one.
	ErrLost = fmt.Errorf("jobs: the store lost the job when it came back empty: %w", ErrNotFound)
	// ErrFinished: the job is already final, so the change does not apply.
	ErrFinished = errors.New("jobs: the job has already finished")
	// ErrNotRunning: the attempt is not the one the job is running. It happens when a replica
	// that stalled past the reclaim time ends its attempt after another replica reclaimed the
	// job: the late attempt's end and what it holds are not recorded.
	ErrNotRunning = errors.New("jobs: the job is not running this attempt")
	// ErrTooManyQueued: the tenant has as many jobs queued as it may.
	ErrTooManyQueued = errors.New("jobs: the tenant has too many jobs queued")
	// ErrTooManyBytes: the tenant's jobs, queued and finished, hold as many bytes as it may.
	ErrTooManyBytes = errors.New("jobs: the tenant's jobs hold too many bytes")
)

// Job is one job. Its request is kept as sent, with the SHA-256 of the key that sent it (never
// the key), which names its caller when it runs.
type Job struct {
	// ID names the job; Add gives it.
	ID string `json:"id"`
	// Tenant names the job's tenant, for metrics and logs; TenantID identifies it, and is what
	// the store indexes the job by, so that a tenant created again under the name of a deleted
	// one does not see the deleted one's jobs.
	Tenant   string `json:"tenant"`
	TenantID string `json:"tenantID"`
	// User is the user of the key that sent the job.
	User     string    `json:"user,omitempty"`
	KeyHash  string    `json:"keyHash"`
	Endpoint string    `json:"endpoint"`
	State    State     `json:"state"`
	Attempts int       `json:"attempts"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	// Deferrals counts the times the job was taken and put back, uncounted, because its own
	// limits refused it before anything went out.
	Deferrals int `json:"deferrals,omitempty"`
	// Error is why the last attempt failed; when the job has failed, why it did.
	Error string `json:"error,omitempty"`
	// Status is the status of the attempt that ended the job: the provider's, or the gateway's
	// own refusal's.
	Status int `json:"status,omitempty"`
	// Body is the request to send; it is kept until the job ends, and returned by Take only.
	Body []byte `json:"-"`
	// Result is the answer to the attempt that ended the job: the provider's, or the error body
	// of the gateway's refusal; returned by Get only.
	Result []byte `json:"-"`
	// Size is the bytes the job holds in the store: its body until it ends, then its result.
	Size int64 `json:"size"`
	// Held is the estimate an attempt took from the limits and has not settled yet. An attempt
	// that finds it left by an earlier one (whose replica died) gives it back.
	Held Cost `json:"held,omitzero"`
	// Charged is true once an attempt's cost has been settled: the job's id is its idempotency
	// key, so a job delivered twice is charged once.
	Charged bool `json:"charged,omitempty"`
	// Batch, when set, names the batch the job is a line of: Line is its number in the batch's
	// input (from 1), CustomID the id its client gave it. Such a job is not listed, and once it
	// ends the store keeps neither it among the finished jobs nor its result (see keptWhenEnded).
	Batch    string `json:"batch,omitempty"`
	Line     int    `json:"line,omitempty"`
	CustomID string `json:"customID,omitempty"`
	// Traceparent is the W3C trace context of the span of the request that created the job,
	// which the spans of its attempts link to; empty when the gateway did not trace it.
	Traceparent string `json:"traceparent,omitempty"`
}

// Owner is whose jobs List returns: a tenant's, by its id, or only those one of its users sent.
type Owner struct {
	TenantID string
	// User, when set, narrows the jobs to those its user sent.
	User string
}

// Owns reports whether j is one of o's jobs.
func (o Owner) Owns(j *Job) bool {
	return j.TenantID == o.TenantID && (o.User == "" || j.User == o.User)
}

// owner is the narrowest owner of j: its user.
func (j *Job) owner() Owner { return Owner{TenantID: j.TenantID, User: j.User} }

// Cost is what a call took from the limits: its tokens, of them its input and output tokens,
// and its dollars.
type Cost struct {
	Tokens       int64 `json:"tokens,omitempty"`
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	MicroDollars int64 `json:"microDollars,omitempty"`
}

// Attempt names one attempt of a job: its id and its number, Job.Attempts when it was taken.
// Once another replica has taken the job over, an earlier attempt changes nothing but the job's
// charge.
type Attempt struct {
	Job string
	N   int
}

// Attempt returns the attempt that j, as taken, is.
func (j *Job) Attempt() Attempt { return Attempt{Job: j.ID, N: j.takes()} }

// takes counts the times j was taken: its attempts and its deferrals. It names the latest take,
// and never goes down.
func (j *Job) takes() int { return j.Attempts + j.Deferrals }

// runs checks that j is running attempt a.
func (j *Job) runs(a Attempt) error {
	switch {
	case j.State.Final():
		return ErrFinished
	case j.State != Running || j.takes() != a.N:
		return fmt.Errorf("jobs: job %s is %s at take %d, not running take %d: %w", j.ID, j.State, j.takes(), a.N, ErrNotRunning)
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
	if j.takes() == a.N {
		j.Held = Cost{}
	}
	return first
}

// Outcome is how an attempt ended.
type Outcome struct {
	// Status and Result are the answer to the attempt: the provider's, or the error body of the
	// gateway's refusal; kept when the attempt ends the job.
	Status int
	Result []byte
	// Err is why the attempt failed; empty when it succeeded.
	Err string
	// Retry says whether another attempt may succeed where this one failed.
	Retry bool
	// NotBefore, when set, says that the attempt never went out: the job's own limits refused
	// it. The job goes back to the queue, the attempt not counted, and is not taken before then.
	NotBefore time.Time
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
	case !o.NotBefore.IsZero():
		j.State, j.Error = Queued, o.Err
		j.Attempts--
		j.Deferrals++
	case o.Err == "":
		j.State, j.Status, j.Result, j.Error = Succeeded, o.Status, o.Result, ""
	case o.Retry && j.Attempts < maxAttempts:
		j.State, j.Error = Queued, o.Err
	case o.Retry:
		j.State, j.Status, j.Result, j.Error = Failed, o.Status, o.Result, fmt.Sprintf("gave up after %d attempts; the last: %s", j.Attempts, o.Err)
	default:
		j.State, j.Status, j.Result, j.Error = Failed, o.Status, o.Result, o.Err
	}
}

// settleSize drops the body of a job that has ended, whose size is now its result's, and returns
// by how much its size changed. A batch's line keeps nothing: its batch records its result.
func (j *Job) settleSize() int64 {
	before := j.Size
	j.Body, j.Size = nil, int64(len(j.Result))
	if j.Batch != "" {
		j.Size = 0
	}
	return j.Size - before
}

// keptWhenEnded reports whether the store keeps j, with its result, among its tenant's finished
// jobs once it has ended. A batch's line is not: its batch records how it ended, and a batch of
// thousands of lines must not push the tenant's own jobs out of the finished ones it keeps.
func (j *Job) keptWhenEnded() bool { return j.Batch == "" }

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
	// MaxFinishedPerTenant is the most finished jobs a tenant keeps: past it, its oldest are
	// forgotten before ResultTTL, so that creating and cancelling jobs in a loop holds no more.
	// Zero means 1,000.
	MaxFinishedPerTenant int
	// MaxBytesPerTenant is the most bytes a tenant's jobs may hold: the bodies of those not
	// finished and the results of those finished and not expired. Add refuses a job that would
	// pass it with ErrTooManyBytes. A result is kept even when it passes the bound, so a tenant
	// may hold up to a result per running job more. Zero means 256 MiB.
	MaxBytesPerTenant int64
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
	if o.MaxFinishedPerTenant <= 0 {
		o.MaxFinishedPerTenant = 1000
	}
	if o.MaxBytesPerTenant <= 0 {
		o.MaxBytesPerTenant = 256 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// ListLimit is the most jobs List returns: the newest.
const ListLimit = 100

// Superseded reports whether err says that a job is no longer an attempt's to run: another
// gateway took it over, or it was cancelled, or it expired or was lost.
func Superseded(err error) bool {
	return errors.Is(err, ErrNotRunning) || errors.Is(err, ErrFinished) || errors.Is(err, ErrNotFound)
}
