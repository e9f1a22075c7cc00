package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/batches"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// batchEndpoints are the endpoints a batch may call, by the path it names.
var batchEndpoints = map[string]estimate.Endpoint{
	"/v1/chat/completions": estimate.Chat,
	"/v1/responses":        estimate.Responses,
	"/v1/embeddings":       estimate.Embeddings,
}

// The completion window a batch asks for, the only one OpenAI serves.
const (
	completionWindow       = "24h"
	completionWindowLength = 24 * time.Hour
)

// How long a batch past its window may wait for lines still recorded (their jobs ran late, or
// their gateway died before recording them) before it ends without them; and how long a
// gateway may take to write a batch's files before another takes the work over.
const (
	expiryGrace     = 5 * time.Minute
	finalizeTimeout = time.Minute
)

// maxLineErrors bounds the errors a batch that fails its validation reports.
const maxLineErrors = 100

// The bounds of a batch's metadata, as OpenAI's.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// batchRequest is the body of POST /v1/batches.
type batchRequest struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// batchAnswer is a batch as OpenAI's API answers it.
type batchAnswer struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *batchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           batches.Status    `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    requestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
}

type batchErrors struct {
	Object string              `json:"object"`
	Data   []batches.LineError `json:"data"`
}

type requestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

func unixOrNil(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	u := t.Unix()
	return &u
}

func stringOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func batchAnswerOf(b *batches.Batch) batchAnswer {
	a := batchAnswer{ID: b.ID, Object: "batch", Endpoint: b.Endpoint, InputFileID: b.InputFileID, CompletionWindow: b.CompletionWindow,
		Status: b.Status, OutputFileID: stringOrNil(b.OutputFileID), ErrorFileID: stringOrNil(b.ErrorFileID), CreatedAt: b.CreatedAt.Unix(),
		InProgressAt: unixOrNil(b.InProgressAt), ExpiresAt: unixOrNil(b.ExpiresAt), FinalizingAt: unixOrNil(b.FinalizingAt),
		CompletedAt: unixOrNil(b.CompletedAt), FailedAt: unixOrNil(b.FailedAt), ExpiredAt: unixOrNil(b.ExpiredAt),
		CancellingAt: unixOrNil(b.CancellingAt), CancelledAt: unixOrNil(b.CancelledAt),
		RequestCounts: requestCounts{Total: b.Total, Completed: b.Counts.Completed, Failed: b.Counts.Failed}, Metadata: b.Metadata}
	if b.Service != nil {
		a.RequestCounts.Completed, a.RequestCounts.Failed = b.Service.Completed, b.Service.Failed
	}
	if len(b.Errors) > 0 {
		a.Errors = &batchErrors{Object: "list", Data: b.Errors}
	}
	return a
}

// serveCreateBatch makes a batch of the lines of a file its caller's tenant uploaded. Every line
// is read and checked as the live endpoint would check it; a file with a line that fails makes a
// batch that has failed, with the lines' errors, before anything is sent. Otherwise each line
// becomes a job of the batch, and the batch is in progress.
func (s *Server) serveCreateBatch(w http.ResponseWriter, r *http.Request) {
	p := s.policy.Load()
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	body, apiErr := readBody(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	req, endpoint, apiErr := readBatchRequest(body)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	content, ok := s.inputFile(w, r, caller, req.InputFileID)
	if !ok {
		return
	}
	key, _ := apiKey(r)                       // authenticated above
	ctx := context.WithoutCancel(r.Context()) // once made, a batch gets all its lines
	b, lines, apiErr := s.newBatch(ctx, p, caller, gatewayv1.HashKey(key), req, endpoint, content)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	if err := s.opts.Batches.AddBatch(ctx, b); err != nil {
		if b.Service != nil {
			s.services.settle(ctx, b, estimate.Usage{}) // give back its hold
		}
		s.batchStoreFailed(w, err)
		return
	}
	switch {
	case b.Service != nil:
		s.services.step(ctx, b.ID)
		b = s.reread(ctx, b)
	case b.Status == batches.InProgress:
		s.addLines(ctx, b, endpoint, lines)
		b = s.batchNow(ctx, b)
	}
	writeJSON(w, http.StatusOK, batchAnswerOf(b))
}

// newBatch is a batch of the lines of content, read and checked, for caller, whose key's
// SHA-256 is keyHash: failed with the lines' errors, or in progress in the gateway's queue, or
// validating on its provider's batch service, its estimate held.
func (s *Server) newBatch(ctx context.Context, p *policy.Policy, caller *policy.Caller, keyHash string, req *batchRequest,
	endpoint estimate.Endpoint, content []byte) (*batches.Batch, []batchLine, *apiError) {
	now := s.now()
	b := &batches.Batch{ID: batches.NewBatchID(), TenantID: caller.Tenant.Config.ID(), Tenant: caller.Tenant.Name, User: caller.User,
		KeyHash: keyHash, Endpoint: req.Endpoint, InputFileID: req.InputFileID, CompletionWindow: req.CompletionWindow,
		Metadata: req.Metadata, CreatedAt: now}
	lines, lineErrs := s.readBatchLines(ctx, p, caller, endpoint, content)
	if len(lineErrs) > 0 {
		b.Status, b.Errors, b.FailedAt = batches.Failed, lineErrs, now
		return b, nil, nil
	}
	b.Status, b.Total, b.InProgressAt, b.ExpiresAt = batches.InProgress, len(lines), now, now.Add(completionWindowLength)
	b.Provider, b.Model = lines[0].sent.route.Provider.Name, lines[0].sent.route.Model.Name
	if runsOnService(lines) {
		return b, lines, s.holdServiceBatch(ctx, caller, b, endpoint, lines)
	}
	return b, lines, nil
}

// readBatchRequest reads the body of POST /v1/batches.
func readBatchRequest(body []byte) (*batchRequest, estimate.Endpoint, *apiError) {
	var req batchRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "", badRequest("invalid_request", "The request body is not valid JSON: want {\"input_file_id\", \"endpoint\", \"completion_window\"}.")
	}
	param := func(e *apiError, name string) *apiError { e.Param = ptr(name); return e }
	endpoint, ok := batchEndpoints[req.Endpoint]
	switch {
	case req.InputFileID == "":
		return nil, "", param(badRequest("invalid_request", "Name the batch's input file in input_file_id."), "input_file_id")
	case !ok:
		return nil, "", param(badRequest("invalid_endpoint", fmt.Sprintf("The endpoint %q cannot be called by a batch: use /v1/chat/completions, /v1/responses or /v1/embeddings.", req.Endpoint)), "endpoint")
	case req.CompletionWindow != completionWindow:
		return nil, "", param(badRequest("invalid_request", fmt.Sprintf("The completion window %q is not served: use \"24h\".", req.CompletionWindow)), "completion_window")
	}
	if msg := metadataProblem(req.Metadata); msg != "" {
		return nil, "", param(badRequest("invalid_request", msg), "metadata")
	}
	return &req, endpoint, nil
}

// metadataProblem says what is wrong with a batch's metadata, or nothing.
func metadataProblem(m map[string]string) string {
	if len(m) > maxMetadataPairs {
		return fmt.Sprintf("metadata may hold at most %d pairs; it holds %d.", maxMetadataPairs, len(m))
	}
	for k, v := range m {
		if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return fmt.Sprintf("metadata's keys may be at most %d characters, and its values %d.", maxMetadataKey, maxMetadataValue)
		}
	}
	return ""
}

// inputFile reads the content of a batch's input file: the caller's tenant's, uploaded for a
// batch. It writes the error to answer when there is none.
func (s *Server) inputFile(w http.ResponseWriter, r *http.Request, caller *policy.Caller, id string) ([]byte, bool) {
	f, err := s.opts.Batches.File(r.Context(), id)
	if err == nil && f.TenantID != caller.Tenant.Config.ID() {
		err = batches.ErrNotFound
	}
	var content []byte
	if err == nil {
		content, err = s.opts.Batches.Content(r.Context(), id)
	}
	switch {
	case errors.Is(err, batches.ErrNotFound):
		e := fileNotFound(id)
		e.Param = ptr("input_file_id")
		e.write(w)
		return nil, false
	case err != nil:
		s.batchStoreFailed(w, err)
		return nil, false
	case f.Purpose != batches.PurposeBatch:
		e := badRequest("invalid_request", fmt.Sprintf("The file %s was not uploaded for a batch (its purpose is %q).", id, f.Purpose))
		e.Param = ptr("input_file_id")
		e.write(w)
		return nil, false
	}
	return content, true
}

// batchLine is a line of a batch's input, read and checked: as its client wrote it, and as it goes
// to the first provider of its model's pool, with its cap and the provider's name of its model,
// at what it costs there.
type batchLine struct {
	n        int
	customID string
	body     json.RawMessage
	sent     offer
}

// inputLine is a line of a batch's input as its client writes it.
type inputLine struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// lineError is why line n of a batch's input was refused (n zero: the whole file).
func lineError(n int, code, param, message string) batches.LineError {
	return batches.LineError{Line: n, Code: code, Param: param, Message: message}
}

// readBatchLines reads every line of a batch's input and checks each as its live endpoint would,
// in the same reading (see checkJobCall), with OpenAI's rules for a batch's lines besides: a
// custom_id unique in the file, POST to the batch's endpoint, and one model for every line. It
// returns the lines, or the errors of those that fail (at most maxLineErrors of them).
func (s *Server) readBatchLines(ctx context.Context, p *policy.Policy, caller *policy.Caller, endpoint estimate.Endpoint, content []byte) ([]batchLine, []batches.LineError) {
	var lines []batchLine
	var errs []batches.LineError
	seen := map[string]bool{}
	model := ""
	most := int(p.Config.Batches.MaxLinesPerBatch)
	for i, raw := range bytes.Split(content, []byte("\n")) {
		if len(errs) >= maxLineErrors {
			break
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		n := i + 1
		if len(lines)+len(errs) >= most {
			return nil, append(errs, lineError(n, "too_many_lines", "", fmt.Sprintf("A batch may hold at most %d requests.", most)))
		}
		l, asked, e := s.readBatchLine(ctx, p, caller, endpoint, n, raw)
		switch {
		case e != nil:
			errs = append(errs, *e)
		case seen[l.customID]:
			errs = append(errs, lineError(n, "duplicate_custom_id", "custom_id", fmt.Sprintf("The custom_id %q is used by an earlier line: each must be unique.", l.customID)))
		case model != "" && asked != model:
			errs = append(errs, lineError(n, "mismatched_model", "body.model", fmt.Sprintf("The model %q is not the batch's %q: every line of a batch must call one model.", asked, model)))
		default:
			seen[l.customID], model = true, asked
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 && len(errs) == 0 {
		errs = append(errs, lineError(0, "empty_file", "", "The batch's input file holds no requests."))
	}
	return lines, errs
}

// readBatchLine reads line n of a batch's input and checks its call. It returns the line and
// the model it asks for, or its error.
func (s *Server) readBatchLine(ctx context.Context, p *policy.Policy, caller *policy.Caller, endpoint estimate.Endpoint, n int, raw []byte) (batchLine, string, *batches.LineError) {
	fail := func(code, param, message string) (batchLine, string, *batches.LineError) {
		e := lineError(n, code, param, message)
		return batchLine{}, "", &e
	}
	var in inputLine
	if err := json.Unmarshal(raw, &in); err != nil {
		return fail("invalid_json_line", "", "This line is not a JSON object: want {\"custom_id\", \"method\", \"url\", \"body\"}.")
	}
	switch {
	case in.CustomID == nil || *in.CustomID == "":
		return fail("missing_required_parameter", "custom_id", "This line has no custom_id.")
	case in.Method != http.MethodPost:
		return fail("invalid_request", "method", "A batch's lines are POST requests: set method to \"POST\".")
	case in.URL != jobPath(endpoint):
		return fail("invalid_url", "url", fmt.Sprintf("The url %q is not the batch's endpoint, %s.", in.URL, jobPath(endpoint)))
	case len(in.Body) == 0 || string(in.Body) == "null":
		return fail("missing_required_parameter", "body", "This line has no body.")
	}
	c, apiErr := s.checkJobCall(ctx, p, caller, endpoint, in.Body)
	if apiErr != nil {
		param := "body"
		if apiErr.Param != nil && *apiErr.Param != "body" {
			param = "body." + strings.TrimPrefix(*apiErr.Param, "body.")
		}
		return fail(apiErr.Code, param, apiErr.Message)
	}
	return batchLine{n: n, customID: *in.CustomID, body: in.Body, sent: c.offer}, c.request.Model, nil
}

// addLines adds each line of an in-progress batch as a job of the batch. A line its tenant's jobs
// have no room for (or that the jobs' store refuses) fails at once, with that error.
func (s *Server) addLines(ctx context.Context, b *batches.Batch, endpoint estimate.Endpoint, lines []batchLine) {
	for _, l := range lines {
		j := &jobs.Job{Tenant: b.Tenant, TenantID: b.TenantID, User: b.User, KeyHash: b.KeyHash, Endpoint: string(endpoint),
			Body: l.body, Batch: b.ID, Line: l.n, CustomID: l.customID}
		err := s.opts.Jobs.Add(ctx, j)
		if err == nil {
			continue
		}
		e := tooManyJobs("Your organization's jobs have no room for this request of the batch.")
		if !errors.Is(err, jobs.ErrTooManyQueued) && !errors.Is(err, jobs.ErrTooManyBytes) {
			s.log.Error("add a batch's line as a job", "batch", b.ID, "line", l.n, "err", err)
			e = &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "jobs_unavailable", Message: "The gateway could not keep this request of the batch."}
		}
		j.State, j.Status, j.Result, j.Error = jobs.Failed, e.status, e.body(), e.Message
		s.lineEnded(ctx, j)
	}
}

// lineHeldBack reports whether a batch's line is not to be sent now: its batch was cancelled, or
// its completion window has passed, and the outcome fails the line, as OpenAI fails such lines;
// or its provider's live calls are at their peak, and the outcome puts it off, uncounted, to a
// valley (see valleys.go).
func (s *Server) lineHeldBack(ctx context.Context, j *jobs.Job) (jobs.Outcome, bool) {
	if j.Batch == "" {
		return jobs.Outcome{}, false
	}
	b, err := s.opts.Batches.Batch(ctx, j.Batch)
	switch {
	case errors.Is(err, batches.ErrNotFound):
		return lineStopped(lineErrorObject{Code: "batch_expired", Message: "This request's batch is no longer kept."}), true
	case err != nil:
		s.log.Error("read a line's batch", "batch", j.Batch, "err", err)
		return jobs.Outcome{}, false
	case !b.CancellingAt.IsZero():
		return lineStopped(lineErrorObject{Code: "batch_cancelled", Message: "This request was not sent: its batch was cancelled."}), true
	case b.Status.Final() || s.now().After(b.ExpiresAt):
		return lineStopped(lineErrorObject{Code: "batch_expired", Message: "This request could not be executed before the completion window expired."}), true
	case s.atPeak(b.Provider):
		return jobs.Outcome{Err: "its provider's live calls are at their peak", NotBefore: time.Now().Add(valleyWait)}, true
	}
	return jobs.Outcome{}, false
}

// lineStopped is the outcome of a line not sent: its result is the line's error object.
func lineStopped(e lineErrorObject) jobs.Outcome {
	result, _ := json.Marshal(e)
	return jobs.Outcome{Err: e.Message, Result: result}
}

// lineErrorObject is the error of a line that got no answer, in its error file.
type lineErrorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// outputLine is a line of a batch's output or error file, as OpenAI writes it.
type outputLine struct {
	ID       string           `json:"id"`
	CustomID string           `json:"custom_id"`
	Response *lineResponse    `json:"response"`
	Error    *lineErrorObject `json:"error"`
}

type lineResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// lineOf is a batch's line as its output or error file holds it, from its job that ended: the
// answer to its call (the provider's, or the error a live call would have got), or the error
// of a line that got none. It also names the line's outcome, for the metric.
func lineOf(j *jobs.Job) (batches.Line, string) {
	id := fmt.Sprintf("batch_req_%s_%d", strings.TrimPrefix(j.Batch, "batch_"), j.Line)
	out := outputLine{ID: id, CustomID: j.CustomID}
	outcome := "failed"
	switch {
	case j.Status != 0:
		body := json.RawMessage(j.Result)
		if !json.Valid(body) {
			body = json.RawMessage("null")
		}
		out.Response = &lineResponse{StatusCode: j.Status, RequestID: id, Body: body}
		if j.State == jobs.Succeeded {
			outcome = "completed"
		}
	case json.Unmarshal(j.Result, &out.Error) == nil && out.Error != nil && out.Error.Code != "":
		outcome = strings.TrimPrefix(out.Error.Code, "batch_")
	default:
		out.Error = &lineErrorObject{Code: "request_failed", Message: j.Error}
	}
	data, _ := json.Marshal(out) // strings, numbers and valid JSON: nothing fails to encode
	return batches.Line{N: j.Line, OK: j.State == jobs.Succeeded, Data: data}, outcome
}

// lineEnded records a batch's line whose job ended, and ends the batch when it was its last.
func (s *Server) lineEnded(ctx context.Context, j *jobs.Job) {
	line, outcome := lineOf(j)
	_, recorded, err := s.opts.Batches.RecordLine(ctx, j.Batch, line)
	if err != nil {
		s.log.Error("record a batch's line", "batch", j.Batch, "line", j.Line, "err", err)
		return
	}
	if recorded {
		s.metrics.batchLines.WithLabelValues(j.Tenant, outcome).Inc()
	}
	if b, err := s.opts.Batches.Batch(ctx, j.Batch); err == nil {
		s.batchNow(ctx, b)
	}
}

// reread is b as the store holds it now, or b when the store cannot say.
func (s *Server) reread(ctx context.Context, b *batches.Batch) *batches.Batch {
	if again, err := s.opts.Batches.Batch(ctx, b.ID); err == nil {
		return again
	}
	return b
}

// errNotDue says that a batch is not to be finalized now, or by this gateway.
var errNotDue = errors.New("the batch is not to be finalized now")

// due reports whether b is to be finalized at now: every line ended, or its window passed by
// expiryGrace, and no other gateway is writing its files. A batch its provider's batch service
// runs is ended by the gateway that follows it (see service.go).
func due(b *batches.Batch, now time.Time) bool {
	switch {
	case b.Status.Final(), b.Status == batches.Validating, b.Service != nil:
		return false
	case b.Status == batches.Finalizing && now.Sub(b.FinalizingAt) < finalizeTimeout:
		return false
	}
	return b.Counts.Done() >= b.Total || now.After(b.ExpiresAt.Add(expiryGrace))
}

// batchNow is b as it is now: finalized first when it is due.
func (s *Server) batchNow(ctx context.Context, b *batches.Batch) *batches.Batch {
	if !due(b, s.now()) {
		return b
	}
	done, err := s.finalize(ctx, b.ID)
	if err != nil {
		if !errors.Is(err, errNotDue) {
			s.log.Error("finalize a batch", "batch", b.ID, "err", err)
		}
		return s.reread(ctx, b)
	}
	return done
}

// finalize ends a batch that is due: it claims it (finalizing), writes its output and error
// files of the lines recorded, in the order of its input, and ends it completed, cancelled, or
// expired when its window passed first.
func (s *Server) finalize(ctx context.Context, id string) (*batches.Batch, error) {
	now := s.now()
	b, err := s.opts.Batches.UpdateBatch(ctx, id, func(b *batches.Batch) error {
		if !due(b, now) {
			return errNotDue
		}
		b.Status, b.FinalizingAt = batches.Finalizing, now
		return nil
	})
	if err != nil {
		return nil, err
	}
	lines, err := s.opts.Batches.Lines(ctx, id)
	if err != nil {
		return nil, err
	}
	output, errorFile, err := s.writeBatchFiles(ctx, b, lines)
	if err != nil {
		return nil, err
	}
	b, err = s.opts.Batches.UpdateBatch(ctx, id, func(b *batches.Batch) error {
		end := s.now()
		switch {
		case !b.CancellingAt.IsZero():
			b.Status, b.CancelledAt = batches.Cancelled, end
		case b.Counts.Done() < b.Total || end.After(b.ExpiresAt):
			b.Status, b.ExpiredAt = batches.Expired, end
		default:
			b.Status, b.CompletedAt = batches.Completed, end
		}
		b.OutputFileID, b.ErrorFileID = output, errorFile
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.opts.Batches.DropLines(ctx, id); err != nil {
		s.log.Error("drop a finished batch's lines", "batch", id, "err", err)
	}
	s.log.Info("batch ended", "batch", id, "tenant", b.Tenant, "status", b.Status, "total", b.Total,
		"completed", b.Counts.Completed, "failed", b.Counts.Failed)
	return b, nil
}

// writeBatchFiles writes a batch's output file (the lines that succeeded) and its error file
// (the others), each when it has a line, and returns their ids. They are the tenant's, kept
// whatever its bounds: their lines were paid for.
func (s *Server) writeBatchFiles(ctx context.Context, b *batches.Batch, lines []batches.Line) (output, errorFile string, err error) {
	var ok, failed bytes.Buffer
	for _, l := range lines {
		to := &failed
		if l.OK {
			to = &ok
		}
		to.Write(l.Data)
		to.WriteByte('\n')
	}
	write := func(content []byte, kind string) (string, error) {
		if len(content) == 0 {
			return "", nil
		}
		f := &batches.File{ID: batches.NewFileID(), TenantID: b.TenantID, Purpose: batches.PurposeBatchOutput,
			Filename: b.ID + "_" + kind + ".jsonl", Content: content}
		return f.ID, s.opts.Batches.AddFile(ctx, f, false)
	}
	if output, err = write(ok.Bytes(), "output"); err != nil {
		return "", "", err
	}
	errorFile, err = write(failed.Bytes(), "error")
	return output, errorFile, err
}

// ownsBatch reports whether o may see b: its tenant's, and with the plan's jobScope User its
// user's.
func ownsBatch(o jobs.Owner, b *batches.Batch) bool {
	return b.TenantID == o.TenantID && (o.User == "" || b.User == o.User)
}

// ownBatch returns the batch named in the path, as it is now, when its caller may see it; else
// it writes the error to answer.
func (s *Server) ownBatch(w http.ResponseWriter, r *http.Request) (*batches.Batch, bool) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return nil, false
	}
	id := r.PathValue("id")
	b, err := s.opts.Batches.Batch(r.Context(), id)
	if err == nil && !ownsBatch(ownerOf(caller), b) {
		err = batches.ErrNotFound // another's batch is not found, as one that does not exist
	}
	switch {
	case errors.Is(err, batches.ErrNotFound):
		(&apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Param: ptr("batch_id"), Message: fmt.Sprintf("No batch found with id '%s'.", id)}).write(w)
		return nil, false
	case err != nil:
		s.batchStoreFailed(w, err)
		return nil, false
	}
	return s.batchNow(r.Context(), b), true
}

func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request) {
	if b, ok := s.ownBatch(w, r); ok {
		writeJSON(w, http.StatusOK, batchAnswerOf(b))
	}
}

// serveCancelBatch cancels a batch that has not ended: it is cancelling until its lines not yet
// sent have failed, and then cancelled, with the lines that ended before in its files.
func (s *Server) serveCancelBatch(w http.ResponseWriter, r *http.Request) {
	b, ok := s.ownBatch(w, r)
	if !ok {
		return
	}
	now := s.now()
	b, err := s.opts.Batches.UpdateBatch(r.Context(), b.ID, func(b *batches.Batch) error {
		switch {
		case b.Status.Final() || b.Status == batches.Finalizing:
			return errBatchEnded
		case b.CancellingAt.IsZero():
			b.Status, b.CancellingAt = batches.Cancelling, now
		}
		return nil
	})
	switch {
	case errors.Is(err, errBatchEnded):
		(&apiError{status: http.StatusConflict, Type: typeInvalidRequest, Code: "batch_finished",
			Message: fmt.Sprintf("Cannot cancel a batch with status '%s'.", b.Status)}).write(w)
	case err != nil:
		s.batchStoreFailed(w, err)
	default:
		if b.Service != nil {
			s.services.step(r.Context(), b.ID)
			b = s.reread(r.Context(), b)
		}
		writeJSON(w, http.StatusOK, batchAnswerOf(s.batchNow(r.Context(), b)))
	}
}

var errBatchEnded = errors.New("the batch has ended")

// serveBatches lists the batches the caller may see, newest first, after ?after= and at most
// ?limit= (20 by default, 100 at most).
func (s *Server) serveBatches(w http.ResponseWriter, r *http.Request) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	limit, apiErr := listLimit(r, 20, 100)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	all, err := s.opts.Batches.Batches(r.Context(), caller.Tenant.Config.ID())
	if err != nil {
		s.batchStoreFailed(w, err)
		return
	}
	owner := ownerOf(caller)
	var mine []*batches.Batch
	for _, b := range all {
		if ownsBatch(owner, b) {
			mine = append(mine, b)
		}
	}
	page, more := batches.PageBatches(mine, r.URL.Query().Get("after"), limit)
	data := make([]batchAnswer, 0, len(page))
	for _, b := range page {
		data = append(data, batchAnswerOf(s.batchNow(r.Context(), b)))
	}
	writeJSON(w, http.StatusOK, listOf(data, func(b batchAnswer) string { return b.ID }, more))
}

// countBatches adds to u the batches queued and running of each provider: those on its batch
// service waiting for room in its enqueued tokens, and the others that have not ended.
func (s *Server) countBatches(ctx context.Context, u *gatewayv1.Usage) {
	open, err := s.opts.Batches.OpenBatches(ctx)
	if err != nil {
		s.log.Warn("count the open batches for the usage snapshot", "err", err)
		return
	}
	for i := range u.Providers {
		p := &u.Providers[i]
		for _, b := range open {
			switch {
			case b.Provider != p.Name:
			case b.Status == batches.Validating:
				p.BatchesQueued++
			default:
				p.BatchesRunning++
			}
		}
	}
}
