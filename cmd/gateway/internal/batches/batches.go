// Package batches keeps what tenants make with OpenAI's Files and Batches APIs: the files they
// upload (a batch's input, one request a line) and write (a batch's output and errors), and the
// batches that run them. A batch's lines run as jobs (see package jobs); as each ends, its line
// of output or of error is recorded in its batch once, however often it is delivered, and the
// batch is done when every line is.
//
// What a tenant keeps is bounded: its files in count and in bytes, and every file and batch in
// time (KeepFor). Memory keeps them in one process; Redis in Redis, shared by every replica.
package batches

import (
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"time"
)

// Errors callers branch on.
var (
	// ErrNotFound: no such file or batch, or it has expired or was deleted.
	ErrNotFound = errors.New("batches: not found")
	// ErrTooManyFiles: the tenant keeps as many files as it may.
	ErrTooManyFiles = errors.New("batches: the tenant keeps too many files")
	// ErrTooManyBytes: the tenant's files hold as many bytes as they may.
	ErrTooManyBytes = errors.New("batches: the tenant's files hold too many bytes")
)

// The purposes of files: what a tenant uploads for a batch, and what a batch writes.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// File is one file. Its content is returned by Content only.
type File struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"tenantID"`
	Purpose   string    `json:"purpose"`
	Filename  string    `json:"filename"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is when the store forgets it.
	ExpiresAt time.Time `json:"expiresAt"`
	Content   []byte    `json:"-"`
}

// Status is where a batch is in its life, in OpenAI's words.
type Status string

// The statuses. Failed, Completed, Expired and Cancelled are final.
const (
	Validating Status = "validating"
	Failed     Status = "failed"
	InProgress Status = "in_progress"
	Finalizing Status = "finalizing"
	Completed  Status = "completed"
	Expired    Status = "expired"
	Cancelling Status = "cancelling"
	Cancelled  Status = "cancelled"
)

// Final reports whether a batch in status s stays there.
func (s Status) Final() bool {
	return s == Failed || s == Completed || s == Expired || s == Cancelled
}

// LineError is why a line of a batch's input was refused when the batch was validated.
type LineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	// Line is the line's number, from 1; zero for an error of the whole file.
	Line int `json:"line,omitempty"`
}

// Batch is one batch. Its request counts are the store's (see Counts), filled by Batch.
type Batch struct {
	ID string `json:"id"`
	// TenantID owns it; Tenant names it for metrics and logs; KeyHash is the SHA-256 of the key
	// that made it, whose caller its lines run as.
	TenantID         string            `json:"tenantID"`
	Tenant           string            `json:"tenant"`
	User             string            `json:"user,omitempty"`
	KeyHash          string            `json:"keyHash"`
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"inputFileID"`
	CompletionWindow string            `json:"completionWindow"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Status           Status            `json:"status"`
	Errors           []LineError       `json:"errors,omitempty"`
	// Total is how many lines it runs.
	Total        int       `json:"total"`
	CreatedAt    time.Time `json:"createdAt"`
	InProgressAt time.Time `json:"inProgressAt,omitzero"`
	ExpiresAt    time.Time `json:"expiresAt,omitzero"`
	FinalizingAt time.Time `json:"finalizingAt,omitzero"`
	CompletedAt  time.Time `json:"completedAt,omitzero"`
	FailedAt     time.Time `json:"failedAt,omitzero"`
	ExpiredAt    time.Time `json:"expiredAt,omitzero"`
	CancellingAt time.Time `json:"cancellingAt,omitzero"`
	CancelledAt  time.Time `json:"cancelledAt,omitzero"`
	OutputFileID string    `json:"outputFileID,omitempty"`
	ErrorFileID  string    `json:"errorFileID,omitempty"`
	// Counts are its lines ended so far.
	Counts Counts `json:"-"`
	// Provider is the provider of the batch's model (its pool's first, of those its caller's plan
	// includes), and Model the one model its lines call; empty for a batch that failed its
	// validation.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Service is set for a batch that its provider's batch service runs, rather than the
	// gateway's queue.
	Service *Service `json:"service,omitempty"`
}

// Service is how a batch runs on its provider's batch service: where, what it holds, and who
// follows it.
type Service struct {
	// BatchID is the provider's id for it, once it was submitted; CancelSent says that the
	// provider was asked to cancel it.
	BatchID    string `json:"batchID,omitempty"`
	CancelSent bool   `json:"cancelSent,omitempty"`
	// Held is the estimate it holds of its caller's limits, taken at Took.
	Held Estimate  `json:"held"`
	Took time.Time `json:"took"`
	// Enqueued is what it holds of its provider's enqueued tokens for its model, once submitted.
	Enqueued int64 `json:"enqueued,omitempty"`
	// Holder names the gateway that follows it, until HeldUntil; another takes it over after.
	Holder    string    `json:"holder,omitempty"`
	HeldUntil time.Time `json:"heldUntil,omitzero"`
	// Completed and Failed are its lines that ended, as its provider counted them.
	Completed int `json:"completed,omitempty"`
	Failed    int `json:"failed,omitempty"`
}

// Estimate is what a batch's lines are estimated to take: tokens, of them input and output
// tokens, and micro-dollars at the provider's batch prices.
type Estimate struct {
	Tokens       int64 `json:"tokens"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	MicroDollars int64 `json:"microDollars"`
}

// EnqueuedKey names what a provider's batch service holds enqueued for a model.
func EnqueuedKey(provider, model string) string { return provider + ":" + model }

// Counts are the lines of a batch that ended: those that succeeded and those that failed.
type Counts struct {
	Completed int
	Failed    int
}

// Done is how many lines ended.
func (c Counts) Done() int { return c.Completed + c.Failed }

// Options configures a store.
type Options struct {
	// MaxFilesPerTenant is the most files a tenant keeps. Zero means 500.
	MaxFilesPerTenant int
	// MaxBytesPerTenant is the most bytes a tenant's files hold. Zero means 1 GiB.
	MaxBytesPerTenant int64
	// KeepFor is how long a file or batch is kept after it is made. Zero means 30 days.
	KeepFor time.Duration
	// Now returns the time. Nil means time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.MaxFilesPerTenant <= 0 {
		o.MaxFilesPerTenant = 500
	}
	if o.MaxBytesPerTenant <= 0 {
		o.MaxBytesPerTenant = 1 << 30
	}
	if o.KeepFor <= 0 {
		o.KeepFor = 30 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Line is the outcome of one line of a batch, as its output or error file holds it.
type Line struct {
	// N is the line's number in the input, from 1: the files list lines in its order.
	N int
	// OK says whether it goes to the output file (its call succeeded) or to the error file.
	OK bool
	// Data is the line as written, without its newline.
	Data []byte
}

// The most of a list a store returns at once.
const MaxList = 10000

// NewFileID and NewBatchID name a new file and a new batch, as OpenAI's ids look.
func NewFileID() string  { return "file-" + rand.Text() }
func NewBatchID() string { return "batch_" + strings.ToLower(rand.Text()) }

// page returns the items of list (newest first) after the one whose id is after (all when after
// is empty or not in list), at most limit of them, and whether more follow.
func page[T any](list []T, id func(T) string, after string, limit int) ([]T, bool) {
	if after != "" {
		if i := slices.IndexFunc(list, func(x T) bool { return id(x) == after }); i >= 0 {
			list = list[i+1:]
		}
	}
	if len(list) > limit {
		return list[:limit], true
	}
	return list, false
}

// Page returns the files after the one named after, at most limit, and whether more follow.
func Page(files []*File, after string, limit int) ([]*File, bool) {
	return page(files, func(f *File) string { return f.ID }, after, limit)
}

// PageBatches returns the batches after the one named after, at most limit, and whether more
// follow.
func PageBatches(list []*Batch, after string, limit int) ([]*Batch, bool) {
	return page(list, func(b *Batch) string { return b.ID }, after, limit)
}
