package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/batches"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// BatchStore keeps the files and batches of OpenAI's Files and Batches APIs: batches.Memory or
// batches.Redis.
type BatchStore interface {
	AddFile(ctx context.Context, f *batches.File, bounded bool) error
	File(ctx context.Context, id string) (*batches.File, error)
	Content(ctx context.Context, id string) ([]byte, error)
	Files(ctx context.Context, tenantID string) ([]*batches.File, error)
	DeleteFile(ctx context.Context, id string) error
	AddBatch(ctx context.Context, b *batches.Batch) error
	Batch(ctx context.Context, id string) (*batches.Batch, error)
	Batches(ctx context.Context, tenantID string) ([]*batches.Batch, error)
	UpdateBatch(ctx context.Context, id string, change func(*batches.Batch) error) (*batches.Batch, error)
	RecordLine(ctx context.Context, batchID string, l batches.Line) (batches.Counts, bool, error)
	Lines(ctx context.Context, batchID string) ([]batches.Line, error)
	DropLines(ctx context.Context, batchID string) error
	OpenBatches(ctx context.Context) ([]*batches.Batch, error)
	Reserve(ctx context.Context, key string, tokens, limit int64) (bool, error)
	Release(ctx context.Context, key string, tokens int64) error
}

// fileAnswer is a file as OpenAI's API answers it.
type fileAnswer struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     int64   `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

func fileAnswerOf(f *batches.File) fileAnswer {
	return fileAnswer{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), ExpiresAt: f.ExpiresAt.Unix(),
		Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
}

// multipartOverhead is what a multipart upload may hold besides its file: the parts' headers and
// the purpose.
const multipartOverhead = 64 << 10

// serveUploadFile keeps a file a tenant uploads for a batch: multipart/form-data with the fields
// purpose ("batch") and file, at most batches.maxFileBytes, within its tenant's bounds.
func (s *Server) serveUploadFile(w http.ResponseWriter, r *http.Request) {
	p := s.policy.Load()
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	f, apiErr := readUpload(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	f.ID, f.TenantID = batches.NewFileID(), caller.Tenant.Config.ID()
	switch err := s.opts.Batches.AddFile(r.Context(), f, true); {
	case errors.Is(err, batches.ErrTooManyFiles):
		tooManyFiles("Your organization keeps as many files as it may. Delete some, and try again.").write(w)
	case errors.Is(err, batches.ErrTooManyBytes):
		tooManyFiles("Your organization's files hold as many bytes as they may. Delete some, and try again.").write(w)
	case err != nil:
		s.batchStoreFailed(w, err)
	default:
		writeJSON(w, http.StatusOK, fileAnswerOf(f))
	}
}

// tooManyFiles is the answer to a file its tenant has no room for.
func tooManyFiles(message string) *apiError {
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "too_many_files", retryAfter: time.Minute, Message: message}
}

// readUpload reads a file's upload: its purpose and its content, which must be a batch's.
func readUpload(p *policy.Policy, r *http.Request) (*batches.File, *apiError) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return nil, badRequest("invalid_request", "Upload a file as multipart/form-data, with the fields purpose and file.")
	}
	most := p.Config.Batches.MaxFileBytes
	parts := multipart.NewReader(http.MaxBytesReader(nil, r.Body, most+multipartOverhead), params["boundary"])
	f := &batches.File{}
	var sawFile bool
	for {
		part, err := parts.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, uploadReadError(err, most)
		}
		switch part.FormName() {
		case "purpose":
			purpose, err := io.ReadAll(io.LimitReader(part, 64))
			if err != nil {
				return nil, uploadReadError(err, most)
			}
			f.Purpose = string(purpose)
		case "file":
			f.Filename, sawFile = part.FileName(), true
			if f.Content, err = io.ReadAll(io.LimitReader(part, most+1)); err != nil {
				return nil, uploadReadError(err, most)
			}
			if int64(len(f.Content)) > most {
				return nil, fileTooLarge(most)
			}
		}
	}
	switch {
	case f.Purpose != batches.PurposeBatch:
		e := badRequest("invalid_request", fmt.Sprintf("The purpose %q is not one Sluice keeps files for: use \"batch\".", f.Purpose))
		e.Param = ptr("purpose")
		return nil, e
	case !sawFile:
		e := badRequest("invalid_request", "The upload holds no file: send it in the field file.")
		e.Param = ptr("file")
		return nil, e
	}
	return f, nil
}

func uploadReadError(err error, most int64) *apiError {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fileTooLarge(most)
	}
	return badRequest("unreadable_body", "The upload could not be read as multipart/form-data.")
}

func fileTooLarge(most int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large", Param: ptr("file"),
		Message: fmt.Sprintf("A file may be at most %d bytes.", most)}
}

// ownFile returns the file a caller's tenant owns by the id in the path, or the error to answer:
// another tenant's file is not found, as one that does not exist.
func (s *Server) ownFile(w http.ResponseWriter, r *http.Request) (*batches.File, bool) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return nil, false
	}
	id := r.PathValue("id")
	f, err := s.opts.Batches.File(r.Context(), id)
	if err == nil && f.TenantID != caller.Tenant.Config.ID() {
		err = batches.ErrNotFound
	}
	switch {
	case errors.Is(err, batches.ErrNotFound):
		fileNotFound(id).write(w)
		return nil, false
	case err != nil:
		s.batchStoreFailed(w, err)
		return nil, false
	}
	return f, true
}

// fileNotFound is OpenAI's 404 for a file that does not exist.
func fileNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Param: ptr("id"), Message: fmt.Sprintf("No such File object: %s", id)}
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.ownFile(w, r); ok {
		writeJSON(w, http.StatusOK, fileAnswerOf(f))
	}
}

func (s *Server) serveFileContent(w http.ResponseWriter, r *http.Request) {
	f, ok := s.ownFile(w, r)
	if !ok {
		return
	}
	content, err := s.opts.Batches.Content(r.Context(), f.ID)
	switch {
	case errors.Is(err, batches.ErrNotFound):
		fileNotFound(f.ID).write(w)
	case err != nil:
		s.batchStoreFailed(w, err)
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		w.Write(content)
	}
}

func (s *Server) serveDeleteFile(w http.ResponseWriter, r *http.Request) {
	f, ok := s.ownFile(w, r)
	if !ok {
		return
	}
	switch err := s.opts.Batches.DeleteFile(r.Context(), f.ID); {
	case errors.Is(err, batches.ErrNotFound):
		fileNotFound(f.ID).write(w)
	case err != nil:
		s.batchStoreFailed(w, err)
	default:
		writeJSON(w, http.StatusOK, struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{f.ID, "file", true})
	}
}

// serveFiles lists the caller's tenant's files, newest first, of ?purpose= when given, after
// ?after= and at most ?limit= (10,000, the default, at most).
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	limit, apiErr := listLimit(r, batches.MaxList, batches.MaxList)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	all, err := s.opts.Batches.Files(r.Context(), caller.Tenant.Config.ID())
	if err != nil {
		s.batchStoreFailed(w, err)
		return
	}
	var files []*batches.File
	for _, f := range all {
		if purpose := r.URL.Query().Get("purpose"); purpose == "" || f.Purpose == purpose {
			files = append(files, f)
		}
	}
	files, more := batches.Page(files, r.URL.Query().Get("after"), limit)
	data := make([]fileAnswer, 0, len(files))
	for _, f := range files {
		data = append(data, fileAnswerOf(f))
	}
	writeJSON(w, http.StatusOK, listOf(data, func(f fileAnswer) string { return f.ID }, more))
}

// list is a page of a list, as OpenAI's API answers it.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	FirstID string `json:"first_id,omitempty"`
	LastID  string `json:"last_id,omitempty"`
	HasMore bool   `json:"has_more"`
}

func listOf[T any](data []T, id func(T) string, more bool) list[T] {
	l := list[T]{Object: "list", Data: data, HasMore: more}
	if len(data) > 0 {
		l.FirstID, l.LastID = id(data[0]), id(data[len(data)-1])
	}
	return l
}

// listLimit reads ?limit=, from 1 to most, def when absent.
func listLimit(r *http.Request, def, most int) (int, *apiError) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		e := badRequest("invalid_request", fmt.Sprintf("limit must be a whole number from 1 to %d.", most))
		e.Param = ptr("limit")
		return 0, e
	}
	return n, nil
}

func (s *Server) batchStoreFailed(w http.ResponseWriter, err error) {
	s.log.Error("batch store failed", "err", err)
	(&apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "batches_unavailable", retryAfter: time.Second,
		Message: "The gateway cannot reach its files and batches right now. Try again shortly."}).write(w)
}
