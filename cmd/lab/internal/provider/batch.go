package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// An OpenAI account's Files and Batch APIs, as OpenAI serves them: a file of
// requests, one JSON line each, uploaded for a batch, and a batch that runs
// them. The account holds at most BatchQueueTokens of its batches' tokens
// (each line's prompt and cap) enqueued for a model: a batch that would pass
// it fails at once with token_limit_exceeded, as OpenAI's does. A batch is in
// progress for BatchDelay, then completed: each line is answered as the call
// would be, billed at half the account's prices, and its answer goes to the
// batch's output file, or, for a line the call's endpoint refuses, to its
// error file. A batch's lines pass none of the account's limits a minute.

// maxUploadBytes bounds an uploaded file.
const maxUploadBytes = 200 << 20

// batchFiles and batchRuns are an account's files and batches.
type batchFiles struct {
	mu      sync.Mutex
	files   map[string]*labFile
	batches map[string]*labBatch
}

func newBatchFiles() *batchFiles {
	return &batchFiles{files: map[string]*labFile{}, batches: map[string]*labBatch{}}
}

// labFile is an uploaded or written file.
type labFile struct {
	object  fileObject
	content []byte
}

type fileObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int    `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
}

// labBatch is a batch: its object, its lines and when it is done.
type labBatch struct {
	object batchObject
	lines  []batchLine
	model  string
	tokens int64 // enqueued while in progress
	done   time.Time
}

type batchObject struct {
	ID               string        `json:"id"`
	Object           string        `json:"object"`
	Endpoint         string        `json:"endpoint"`
	Errors           *batchErrors  `json:"errors"`
	InputFileID      string        `json:"input_file_id"`
	CompletionWindow string        `json:"completion_window"`
	Status           string        `json:"status"`
	OutputFileID     *string       `json:"output_file_id"`
	ErrorFileID      *string       `json:"error_file_id"`
	CreatedAt        int64         `json:"created_at"`
	InProgressAt     *int64        `json:"in_progress_at"`
	ExpiresAt        *int64        `json:"expires_at"`
	CompletedAt      *int64        `json:"completed_at"`
	FailedAt         *int64        `json:"failed_at"`
	CancelledAt      *int64        `json:"cancelled_at"`
	RequestCounts    requestCounts `json:"request_counts"`
}

type batchErrors struct {
	Object string       `json:"object"`
	Data   []batchError `json:"data"`
}

type batchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    *int   `json:"line"`
}

type requestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// batchLine is a line of a batch's input: its id, and its request as read,
// or why the endpoint refuses it.
type batchLine struct {
	customID string
	req      openai.Request
	refused  *openai.Error
}

// batchEndpoints are the endpoints a batch may call, by path.
var batchEndpoints = map[string]openai.Endpoint{
	openai.Chat.Path(): openai.Chat, openai.Completions.Path(): openai.Completions, openai.Embeddings.Path(): openai.Embeddings,
}

func (s *Server) batchRoutes() {
	s.mux.Handle("POST /v1/files", s.api(s.uploadFile))
	s.mux.Handle("GET /v1/files/{id}", s.api(s.getFile))
	s.mux.Handle("GET /v1/files/{id}/content", s.api(s.fileContent))
	s.mux.Handle("POST /v1/batches", s.api(s.createBatch))
	s.mux.Handle("GET /v1/batches/{id}", s.api(s.getBatch))
	s.mux.Handle("POST /v1/batches/{id}/cancel", s.api(s.cancelBatch))
}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	purpose, name, content, err := readUpload(r)
	if err != nil {
		err.Write(w)
		return
	}
	if purpose != "batch" {
		openai.InvalidRequest("purpose", "The lab keeps files for batches only: purpose must be 'batch'.").Write(w)
		return
	}
	f := s.addFile(name, "batch", content)
	openai.WriteJSON(w, http.StatusOK, f.object)
}

// readUpload reads a multipart upload's purpose and file.
func readUpload(r *http.Request) (purpose, name string, content []byte, _ *openai.Error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return "", "", nil, openai.InvalidRequest("", "Upload a file as multipart/form-data.")
	}
	parts := multipart.NewReader(http.MaxBytesReader(nil, r.Body, maxUploadBytes), params["boundary"])
	for {
		part, err := parts.NextPart()
		if errors.Is(err, io.EOF) {
			return purpose, name, content, nil
		}
		if err != nil {
			return "", "", nil, openai.InvalidRequest("file", "The upload could not be read.")
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return "", "", nil, openai.InvalidRequest("file", "The upload could not be read.")
		}
		switch part.FormName() {
		case "purpose":
			purpose = string(data)
		case "file":
			name, content = part.FileName(), data
		}
	}
}

// addFile keeps a file and returns it.
func (s *Server) addFile(name, purpose string, content []byte) *labFile {
	f := &labFile{content: content, object: fileObject{ID: fmt.Sprintf("file-lab%d", s.seq.Add(1)), Object: "file", Bytes: len(content),
		CreatedAt: s.clock.Now().Unix(), Filename: name, Purpose: purpose, Status: "processed"}}
	s.batchFiles.mu.Lock()
	defer s.batchFiles.mu.Unlock()
	s.batchFiles.files[f.object.ID] = f
	return f
}

func (s *Server) file(id string) (*labFile, *openai.Error) {
	s.batchFiles.mu.Lock()
	defer s.batchFiles.mu.Unlock()
	f, ok := s.batchFiles.files[id]
	if !ok {
		return nil, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "id", Message: "No such File object: " + id}
	}
	return f, nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	f, err := s.file(r.PathValue("id"))
	if err != nil {
		err.Write(w)
		return
	}
	openai.WriteJSON(w, http.StatusOK, f.object)
}

func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) {
	f, err := s.file(r.PathValue("id"))
	if err != nil {
		err.Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(f.content)
}

// createBatch makes a batch of an uploaded file's lines: in progress, unless
// its tokens would pass what the account may hold enqueued for its model.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InputFileID      string `json:"input_file_id"`
		Endpoint         string `json:"endpoint"`
		CompletionWindow string `json:"completion_window"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, openai.MaxBodyBytes)).Decode(&req); err != nil {
		openai.InvalidRequest("", "We could not parse the JSON body of your request.").Write(w)
		return
	}
	e, ok := batchEndpoints[req.Endpoint]
	switch {
	case !ok:
		openai.InvalidRequest("endpoint", "The endpoint %q is not one a batch may call.", req.Endpoint).Write(w)
		return
	case req.CompletionWindow != "24h":
		openai.InvalidRequest("completion_window", "The completion window must be '24h'.").Write(w)
		return
	}
	f, err := s.file(req.InputFileID)
	if err != nil {
		err.Write(w)
		return
	}
	b := s.newBatch(req.InputFileID, req.Endpoint, s.readLines(e, f.content))
	openai.WriteJSON(w, http.StatusOK, b)
}

// readLines reads a batch's input, each line as its endpoint reads a call.
func (s *Server) readLines(e openai.Endpoint, content []byte) []batchLine {
	var lines []batchLine
	for raw := range bytes.Lines(content) {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var in struct {
			CustomID string          `json:"custom_id"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			lines = append(lines, batchLine{refused: openai.InvalidRequest("", "This line is not JSON.")})
			continue
		}
		req, err := openai.Parse(e, in.Body, s.opts.DefaultMaxTokens)
		var refused *openai.Error
		switch {
		case errors.As(err, &refused):
		case err == nil && !s.opts.serves(req.Model):
			refused = openai.UnknownModel(req.Model)
		}
		lines = append(lines, batchLine{customID: in.CustomID, req: req, refused: refused})
	}
	return lines
}

// serves reports whether the account serves model.
func (o Options) serves(model string) bool {
	for _, m := range o.Models {
		if m == model {
			return true
		}
	}
	return false
}

// newBatch keeps a batch of lines and returns its object: in progress, or
// failed when its tokens would pass the account's enqueued limit.
func (s *Server) newBatch(input, endpoint string, lines []batchLine) batchObject {
	now := s.clock.Now()
	created, expires := now.Unix(), now.Add(24*time.Hour).Unix()
	b := &labBatch{lines: lines, done: now.Add(s.opts.BatchDelay), object: batchObject{ID: fmt.Sprintf("batch_lab%d", s.seq.Add(1)),
		Object: "batch", Endpoint: endpoint, InputFileID: input, CompletionWindow: "24h", CreatedAt: created, ExpiresAt: &expires,
		RequestCounts: requestCounts{Total: len(lines)}}}
	for _, l := range lines {
		if l.refused == nil {
			b.model, b.tokens = l.req.Model, b.tokens+l.req.PromptTokens+l.req.CompletionTokens
		}
	}
	s.batchFiles.mu.Lock()
	defer s.batchFiles.mu.Unlock()
	if limit := s.opts.BatchQueueTokens; limit > 0 && s.enqueued(b.model)+b.tokens > limit {
		b.object.Status, b.object.FailedAt = "failed", &created
		b.object.Errors = &batchErrors{Object: "list", Data: []batchError{{Code: "token_limit_exceeded",
			Message: fmt.Sprintf("Enqueued token limit reached for %s. Limit: %d enqueued tokens. Please try again once some in_progress batches have been completed.", b.model, limit)}}}
		s.mu.Lock()
		s.account.stats.BatchesRefused++
		s.mu.Unlock()
	} else {
		b.object.Status, b.object.InProgressAt = "in_progress", &created
	}
	s.batchFiles.batches[b.object.ID] = b
	return b.object
}

// enqueued is the tokens the account's batches in progress hold for model.
// The caller holds s.batchFiles.mu.
func (s *Server) enqueued(model string) int64 {
	var n int64
	for _, b := range s.batchFiles.batches {
		if b.object.Status == "in_progress" && b.model == model {
			n += b.tokens
		}
	}
	return n
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	b, err := s.batchNow(r.PathValue("id"))
	if err != nil {
		err.Write(w)
		return
	}
	openai.WriteJSON(w, http.StatusOK, b)
}

func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) {
	b, err := s.batchNow(r.PathValue("id"))
	if err != nil {
		err.Write(w)
		return
	}
	s.batchFiles.mu.Lock()
	defer s.batchFiles.mu.Unlock()
	lb := s.batchFiles.batches[b.ID]
	if lb.object.Status == "in_progress" {
		at := s.clock.Now().Unix()
		lb.object.Status, lb.object.CancelledAt = "cancelled", &at
	}
	openai.WriteJSON(w, http.StatusOK, lb.object)
}

// batchNow returns a batch as it is now: completed, once in progress for
// BatchDelay.
func (s *Server) batchNow(id string) (batchObject, *openai.Error) {
	s.batchFiles.mu.Lock()
	b, ok := s.batchFiles.batches[id]
	s.batchFiles.mu.Unlock()
	if !ok {
		return batchObject{}, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Message: "No batch found with id '" + id + "'."}
	}
	now := s.clock.Now()
	s.batchFiles.mu.Lock()
	due := b.object.Status == "in_progress" && !now.Before(b.done)
	if due {
		b.object.Status = "finalizing" // this request completes it
	}
	s.batchFiles.mu.Unlock()
	if due {
		s.completeBatch(b, now)
	}
	s.batchFiles.mu.Lock()
	defer s.batchFiles.mu.Unlock()
	return b.object, nil
}

// completeBatch answers each line of a batch, bills what it served at half the
// account's prices, and writes its output and error files.
func (s *Server) completeBatch(b *labBatch, now time.Time) {
	var output, errs bytes.Buffer
	counts := requestCounts{Total: len(b.lines)}
	for i, l := range b.lines {
		status, body := s.answerLine(l, now)
		to := &errs
		if status == http.StatusOK {
			to, counts.Completed = &output, counts.Completed+1
		} else {
			counts.Failed++
		}
		id := fmt.Sprintf("batch_req_lab%d_%d", s.seq.Add(1), i+1)
		line, _ := json.Marshal(map[string]any{"id": id, "custom_id": l.customID, "error": nil,
			"response": map[string]any{"status_code": status, "request_id": id, "body": json.RawMessage(body)}})
		to.Write(append(line, '\n'))
	}
	fileID := func(content []byte, kind string) *string {
		if len(content) == 0 {
			return nil
		}
		id := s.addFile(b.object.ID+"_"+kind+".jsonl", "batch_output", content).object.ID
		return &id
	}
	out, errFile := fileID(output.Bytes(), "output"), fileID(errs.Bytes(), "error")
	at := now.Unix()
	s.batchFiles.mu.Lock()
	defer s.batchFiles.mu.Unlock()
	b.object.Status, b.object.CompletedAt, b.object.RequestCounts = "completed", &at, counts
	b.object.OutputFileID, b.object.ErrorFileID = out, errFile
}

// answerLine is a line's answer: the call's, billed at half the account's
// prices, or the error its endpoint refuses it with.
func (s *Server) answerLine(l batchLine, now time.Time) (int, []byte) {
	rec := httptest.NewRecorder()
	if l.refused != nil {
		l.refused.Write(rec)
		return rec.Code, rec.Body.Bytes()
	}
	a := s.opts.chatAsk(l.req)
	bill := s.opts.price(a.whole, "")
	bill.MicroDollars = (bill.MicroDollars + 1) / 2
	s.mu.Lock()
	s.account.stats.bill(bill, "")
	s.account.stats.BatchLines++
	s.mu.Unlock()
	openai.WriteReply(rec, l.req.Endpoint, reply(l.req, bill, s.seq.Add(1), now.Unix()))
	return http.StatusOK, rec.Body.Bytes()
}
