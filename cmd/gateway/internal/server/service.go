package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/batches"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// A batch for a model whose provider runs batches on its own batch service (batches: Service)
// runs there: the gateway holds the batch's estimate, at the provider's batch prices, of its
// caller's calendar windows when it is made, submits its lines (as checked, with their caps) to
// the provider with the provider's key once the provider's enqueued tokens for the model leave
// room, follows the provider's batch to its end, copies its output and error files to the
// tenant, and settles the hold at the usage of its output. The batch is recorded in the store,
// and followed by one gateway at a time, which holds it: when that gateway dies, another takes
// it over once its hold lapses.

// The pace of following batches on their providers' batch services.
const (
	serviceTick    = time.Second
	serviceHoldFor = 30 * time.Second
	// maxServiceFileBytes bounds a file read from a provider's batch service.
	maxServiceFileBytes = 512 << 20
)

// services follows the batches this gateway holds on their providers' batch services.
type services struct {
	s      *Server
	holder string
}

// runsOnService reports whether a batch of lines runs on its provider's batch service: the
// provider of its model's first offer has one.
func runsOnService(lines []batchLine) bool {
	return len(lines) > 0 && lines[0].sent.route.Provider.Config.Batches == gatewayv1.BatchesService
}

// holdServiceBatch makes b a batch of its provider's batch service, waiting to be submitted, and
// holds its estimate of its caller's limits. A batch whose tokens alone pass the provider's
// enqueued token limit fails, as the provider would fail it; a hold its caller's limits refuse is
// the error a live call would get.
func (s *Server) holdServiceBatch(ctx context.Context, caller *policy.Caller, b *batches.Batch, endpoint estimate.Endpoint, lines []batchLine) *apiError {
	route := lines[0].sent.route
	var est policy.Cost
	for _, l := range lines {
		est.Tokens += l.sent.cost.Tokens
		est.InputTokens += l.sent.cost.InputTokens
		est.OutputTokens += l.sent.cost.OutputTokens
		est.MicroDollars += l.sent.cost.MicroDollars
	}
	est.MicroDollars = admission.BatchPrice(est.MicroDollars)
	if limit := route.Provider.Config.BatchQueueTokens; limit > 0 && est.Tokens > limit {
		b.Status, b.FailedAt, b.Total = batches.Failed, b.CreatedAt, 0
		b.Errors = []batches.LineError{lineError(0, "token_limit_exceeded", "",
			fmt.Sprintf("The batch's %d tokens are more than its provider holds enqueued for %s, %d.", est.Tokens, route.Model.Name, limit))}
		return nil
	}
	req := admission.Request{Caller: caller, Route: route, Endpoint: planEndpoint(endpoint), Cost: est}
	took, refusal := s.gate.HoldBatch(ctx, req, int64(len(lines)))
	switch {
	case refusal != nil && refusal.Reason == admission.TooLarge:
		e := badRequest("request_too_large", "This batch is larger than "+limitText(refusal)+". Waiting will not help; make the batch smaller.")
		e.Param = ptr("input_file_id")
		return e
	case refusal != nil:
		return refusalError(nil, nil, refusal)
	}
	b.Status, b.Total = batches.Validating, len(lines)
	b.ExpiresAt = b.CreatedAt.Add(completionWindowLength)
	b.Service = &batches.Service{Took: took,
		Held: batches.Estimate{Tokens: est.Tokens, InputTokens: est.InputTokens, OutputTokens: est.OutputTokens, MicroDollars: est.MicroDollars}}
	return nil
}

// loop follows the batches on batch services until ctx ends: every serviceTick, each that no
// other gateway holds.
func (f *services) loop(ctx context.Context) {
	t := time.NewTicker(serviceTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			open, err := f.s.opts.Batches.OpenBatches(ctx)
			if err != nil {
				f.s.log.Warn("list the batches on batch services", "err", err)
				continue
			}
			for _, b := range open {
				if b.Service != nil {
					f.step(ctx, b.ID)
				}
			}
		}
	}
}

// step takes a batch on a batch service a step on: it holds it, then submits it (or ends one
// cancelled, or past its window, before it was), asks its provider to cancel it, or reads
// whether it has ended.
func (f *services) step(ctx context.Context, id string) {
	b, err := f.hold(ctx, id)
	switch {
	case errors.Is(err, errNotDue):
		return
	case err != nil:
		f.s.log.Warn("hold a batch on its batch service", "batch", id, "err", err)
		return
	}
	switch {
	case b.Service.BatchID == "" && !b.CancellingAt.IsZero():
		f.end(ctx, b, batches.Cancelled, estimate.Usage{}, "", "")
	case b.Service.BatchID == "" && time.Now().After(b.ExpiresAt):
		f.end(ctx, b, batches.Expired, estimate.Usage{}, "", "") // it never found room at its provider
	case b.Service.BatchID == "":
		f.submit(ctx, b)
	default:
		f.follow(ctx, b)
	}
}

// hold makes this gateway the one that follows a batch, unless another holds it.
func (f *services) hold(ctx context.Context, id string) (*batches.Batch, error) {
	now := time.Now()
	return f.s.opts.Batches.UpdateBatch(ctx, id, func(b *batches.Batch) error {
		if b.Service == nil || b.Status.Final() || (b.Service.Holder != f.holder && now.Before(b.Service.HeldUntil)) {
			return errNotDue
		}
		b.Service.Holder, b.Service.HeldUntil = f.holder, now.Add(serviceHoldFor)
		return nil
	})
}

// request is the admission request a batch on a batch service held, under the configuration in
// force.
func (f *services) request(b *batches.Batch) (admission.Request, error) {
	p := f.s.policy.Load()
	caller := p.CallerOf(b.KeyHash)
	if caller == nil {
		return admission.Request{}, fmt.Errorf("the key that made the batch is no longer configured")
	}
	for _, route := range p.Routes(b.Model) {
		if route.Provider.Name == b.Provider {
			h := b.Service.Held
			cost := policy.Cost{Tokens: h.Tokens, InputTokens: h.InputTokens, OutputTokens: h.OutputTokens, MicroDollars: h.MicroDollars}
			return admission.Request{Caller: caller, Route: route, Endpoint: planEndpoint(batchEndpoints[b.Endpoint]), Cost: cost}, nil
		}
	}
	return admission.Request{}, fmt.Errorf("the provider %q no longer serves the model %q", b.Provider, b.Model)
}

// submit sends a batch to its provider's batch service once the provider's enqueued tokens for
// its model leave room for it; until then it waits, validating.
func (f *services) submit(ctx context.Context, b *batches.Batch) {
	req, err := f.request(b)
	if err != nil {
		f.fail(ctx, b, err.Error())
		return
	}
	key, tokens := batches.EnqueuedKey(b.Provider, b.Model), b.Service.Held.Tokens
	ok, err := f.s.opts.Batches.Reserve(ctx, key, tokens, req.Route.Provider.Config.BatchQueueTokens)
	if err != nil || !ok {
		return // the provider's batches before it hold its room: it waits
	}
	input, err := f.input(ctx, req.Caller, b)
	if err != nil {
		f.release(ctx, key, tokens)
		f.fail(ctx, b, err.Error())
		return
	}
	id, err := f.create(ctx, req.Route.Provider, b.Endpoint, input)
	if err != nil {
		f.release(ctx, key, tokens)
		f.s.log.Warn("submit a batch to its provider's batch service; it is tried again", "batch", b.ID, "provider", b.Provider, "err", err)
		return
	}
	now := time.Now()
	_, err = f.s.opts.Batches.UpdateBatch(ctx, b.ID, func(b *batches.Batch) error {
		b.Service.BatchID, b.Service.Enqueued = id, tokens
		b.Status, b.InProgressAt = batches.InProgress, now
		if !b.CancellingAt.IsZero() {
			b.Status = batches.Cancelling
		}
		return nil
	})
	if err != nil {
		f.s.log.Error("record a batch submitted to its provider", "batch", b.ID, "provider_batch", id, "err", err)
	}
}

// input is a batch's lines as its provider receives them: read from its input file and checked
// again, each with its cap and its provider's name of its model.
func (f *services) input(ctx context.Context, caller *policy.Caller, b *batches.Batch) ([]byte, error) {
	content, err := f.s.opts.Batches.Content(ctx, b.InputFileID)
	if err != nil {
		return nil, fmt.Errorf("the batch's input file could not be read: %w", err)
	}
	lines, errs := f.s.readBatchLines(ctx, f.s.policy.Load(), caller, batchEndpoints[b.Endpoint], content)
	if len(errs) > 0 {
		return nil, fmt.Errorf("line %d of the batch's input is refused now: %s", errs[0].Line, errs[0].Message)
	}
	var out bytes.Buffer
	for _, l := range lines {
		line, _ := json.Marshal(inputLine{CustomID: &l.customID, Method: http.MethodPost, URL: b.Endpoint, Body: l.sent.body.bytes()})
		out.Write(append(line, '\n'))
	}
	return out.Bytes(), nil
}

// providerBatch is what the gateway reads of a provider's batch.
type providerBatch struct {
	ID            string        `json:"id"`
	Status        string        `json:"status"`
	OutputFileID  string        `json:"output_file_id"`
	ErrorFileID   string        `json:"error_file_id"`
	RequestCounts requestCounts `json:"request_counts"`
	Errors        *batchErrors  `json:"errors"`
}

// create uploads a batch's input to its provider and makes the provider's batch of it. It
// returns the provider's batch's id.
func (f *services) create(ctx context.Context, p *policy.Provider, endpoint string, input []byte) (string, error) {
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	form.WriteField("purpose", batches.PurposeBatch)
	part, _ := form.CreateFormFile("file", "batch.jsonl")
	part.Write(input)
	form.Close()
	h := providerHeaders(nil, p)
	h.Set("Content-Type", form.FormDataContentType())
	var file struct {
		ID string `json:"id"`
	}
	if err := f.call(ctx, p, http.MethodPost, "/v1/files", h, body.Bytes(), &file); err != nil {
		return "", fmt.Errorf("upload its input: %w", err)
	}
	made, _ := json.Marshal(map[string]string{"input_file_id": file.ID, "endpoint": endpoint, "completion_window": completionWindow})
	var pb providerBatch
	if err := f.call(ctx, p, http.MethodPost, "/v1/batches", providerHeaders(nil, p), made, &pb); err != nil {
		return "", fmt.Errorf("make its batch: %w", err)
	}
	if pb.Status == string(batches.Failed) {
		return "", fmt.Errorf("the provider failed the batch at once: %s", firstError(pb.Errors))
	}
	return pb.ID, nil
}

func firstError(e *batchErrors) string {
	if e == nil || len(e.Data) == 0 {
		return "it says not why"
	}
	return e.Data[0].Code + ": " + e.Data[0].Message
}

// call sends a call to a provider's batch service and reads its JSON answer into out.
func (f *services) call(ctx context.Context, p *policy.Provider, method, path string, h http.Header, body []byte, out any) error {
	data, err := f.read(ctx, p, method, path, h, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// read sends a call to a provider's batch service and returns its answer's body, which must be a
// 200's.
func (f *services) read(ctx context.Context, p *policy.Provider, method, path string, h http.Header, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Config.CallTimeout.Duration)
	defer cancel()
	resp, err := f.s.sendProvider(ctx, p, method, path, "", h, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxServiceFileBytes))
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("the provider answered %d: %s", resp.StatusCode, errorMessage(data))
	}
	return data, nil
}

// follow reads a submitted batch at its provider, asking the provider to cancel it first when
// its tenant cancelled it, and ends it once the provider's has ended.
func (f *services) follow(ctx context.Context, b *batches.Batch) {
	p := f.s.policy.Load().Provider(b.Provider)
	if p == nil {
		f.s.log.Warn("follow a batch whose provider is no longer configured", "batch", b.ID, "provider", b.Provider)
		return
	}
	path := "/v1/batches/" + b.Service.BatchID
	if !b.CancellingAt.IsZero() && !b.Service.CancelSent {
		if _, err := f.read(ctx, p, http.MethodPost, path+"/cancel", providerHeaders(nil, p), nil); err != nil {
			f.s.log.Warn("cancel a batch at its provider", "batch", b.ID, "err", err)
			return
		}
		f.s.opts.Batches.UpdateBatch(ctx, b.ID, func(b *batches.Batch) error { b.Service.CancelSent = true; return nil })
	}
	var pb providerBatch
	if err := f.call(ctx, p, http.MethodGet, path, providerHeaders(nil, p), nil, &pb); err != nil {
		f.s.log.Warn("read a batch at its provider", "batch", b.ID, "err", err)
		return
	}
	status := batches.Status(pb.Status)
	if !status.Final() {
		return
	}
	output, used, err := f.copyFile(ctx, p, b, pb.OutputFileID, "output")
	if err != nil {
		f.s.log.Warn("copy a batch's output from its provider", "batch", b.ID, "err", err)
		return
	}
	errorFile, _, err := f.copyFile(ctx, p, b, pb.ErrorFileID, "error")
	if err != nil {
		f.s.log.Warn("copy a batch's errors from its provider", "batch", b.ID, "err", err)
		return
	}
	b.Service.Completed, b.Service.Failed = pb.RequestCounts.Completed, pb.RequestCounts.Failed
	f.end(ctx, b, status, used, output, errorFile)
}

// copyFile copies a file of a provider's batch to the batch's tenant, and returns its id and the
// usage its lines report. No file, no copy.
func (f *services) copyFile(ctx context.Context, p *policy.Provider, b *batches.Batch, id, kind string) (string, estimate.Usage, error) {
	if id == "" {
		return "", estimate.Usage{}, nil
	}
	content, err := f.read(ctx, p, http.MethodGet, "/v1/files/"+id+"/content", providerHeaders(nil, p), nil)
	if err != nil {
		return "", estimate.Usage{}, err
	}
	file := &batches.File{ID: batches.NewFileID(), TenantID: b.TenantID, Purpose: batches.PurposeBatchOutput, Filename: b.ID + "_" + kind + ".jsonl", Content: content}
	if err := f.s.opts.Batches.AddFile(ctx, file, false); err != nil {
		return "", estimate.Usage{}, err
	}
	return file.ID, usageOfLines(content), nil
}

// usageOfLines adds up the usage of the answers in a batch's output file.
func usageOfLines(content []byte) estimate.Usage {
	var sum estimate.Usage
	for raw := range bytes.Lines(content) {
		var line struct {
			Response *lineResponse `json:"response"`
		}
		if json.Unmarshal(raw, &line) != nil || line.Response == nil {
			continue
		}
		u, ok := estimate.ParseUsage(line.Response.Body)
		if !ok {
			continue
		}
		sum.PromptTokens += u.PromptTokens
		sum.CachedPromptTokens += u.CachedPromptTokens
		sum.AudioPromptTokens += u.AudioPromptTokens
		sum.CacheWriteTokens += u.CacheWriteTokens
		sum.CompletionTokens += u.CompletionTokens
		sum.ReasoningTokens += u.ReasoningTokens
		sum.AudioCompletionTokens += u.AudioCompletionTokens
		sum.TotalTokens += u.TotalTokens
	}
	return sum
}

// fail ends a batch that cannot be submitted, holding nothing.
func (f *services) fail(ctx context.Context, b *batches.Batch, why string) {
	b.Errors = append(b.Errors, lineError(0, "batch_failed", "", why))
	f.end(ctx, b, batches.Failed, estimate.Usage{}, "", "")
}

// end settles a batch's hold at what it used, gives back its provider's enqueued tokens and ends
// it in status with its files.
func (f *services) end(ctx context.Context, b *batches.Batch, status batches.Status, used estimate.Usage, output, errorFile string) {
	if f.settle(ctx, b, used) != nil {
		return // tried again at the next step
	}
	f.release(ctx, batches.EnqueuedKey(b.Provider, b.Model), b.Service.Enqueued)
	now := time.Now()
	done, err := f.s.opts.Batches.UpdateBatch(ctx, b.ID, func(stored *batches.Batch) error {
		stored.Status, stored.OutputFileID, stored.ErrorFileID, stored.Errors = status, output, errorFile, b.Errors
		stored.Service.Completed, stored.Service.Failed, stored.Service.Enqueued = b.Service.Completed, b.Service.Failed, 0
		switch status {
		case batches.Completed:
			stored.CompletedAt = now
		case batches.Cancelled:
			stored.CancelledAt = now
		case batches.Expired:
			stored.ExpiredAt = now
		default:
			stored.FailedAt = now
		}
		return nil
	})
	if err != nil {
		f.s.log.Error("end a batch of a batch service", "batch", b.ID, "err", err)
		return
	}
	f.s.log.Info("batch ended", "batch", done.ID, "tenant", done.Tenant, "provider", done.Provider, "status", done.Status,
		"total", done.Total, "completed", done.Service.Completed, "failed", done.Service.Failed)
}

// settle settles a batch's hold at what it used. A batch whose caller or provider is no longer
// configured keeps its hold, the safe side.
func (f *services) settle(ctx context.Context, b *batches.Batch, used estimate.Usage) error {
	req, err := f.request(b)
	if err != nil {
		f.s.log.Error("settle a batch whose caller or provider is no longer configured; its hold stays", "batch", b.ID, "err", err)
		return nil
	}
	if _, err := f.s.gate.SettleBatch(ctx, req, int64(b.Total), b.Service.Took, used, "batch:"+b.ID); err != nil {
		f.s.log.Warn("settle a batch; it is tried again", "batch", b.ID, "err", err)
		return err
	}
	return nil
}

func (f *services) release(ctx context.Context, key string, tokens int64) {
	if tokens == 0 {
		return
	}
	if err := f.s.opts.Batches.Release(ctx, key, tokens); err != nil {
		f.s.log.Error("give back a provider's enqueued batch tokens", "key", key, "err", err)
	}
}
