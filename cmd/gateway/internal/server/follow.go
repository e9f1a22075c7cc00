package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/kept"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// A background response (a Responses call with "background": true) is answered before it has
// run, with no usage: its provider bills it when it ends, for input the body may not show (a
// previous response, a file, a tool's results). The gateway holds the call's ticket, its estimate
// and its slots in flight, until then, and follows the response to its end with its own key, as a
// client polls it, to settle the call at its final usage. The follow is recorded in the store
// with what settles it, held by the gateway following it: when that gateway stops renewing its
// hold (it died), another claims the follow and settles it under the call's lease, which lands
// once whoever sends it. A response that cannot be followed to its end (it was deleted, or runs
// past kept.followFor) is settled at its bound: its model's contextWindow of input, its cap of
// output.

// The follower's pace.
const (
	// followTick is how often the follower looks for responses due a poll.
	followTick = time.Second
	// firstPoll is the wait before a response's first poll; each poll that finds it running
	// doubles the wait, up to lastPoll.
	firstPoll = time.Second
	lastPoll  = 30 * time.Second
	// claimAtOnce bounds the follows one claim takes.
	claimAtOnce = 64
	// keptTimeout bounds each of the store's reads and writes of kept objects.
	keptTimeout = 5 * time.Second
	// maxPolledBytes bounds the response a poll reads.
	maxPolledBytes = 32 << 20
)

// follower follows this gateway's background responses to their end.
type follower struct {
	s      *Server
	holder string // names this gateway's holds
	mu     sync.Mutex
	runs   map[string]*run // by response id
}

// run is one background response the follower follows.
type run struct {
	f      kept.Follow
	ticket *admission.Ticket // nil for one claimed from another gateway
	next   time.Time         // when to poll it next
	wait   time.Duration     // the wait after the next poll that finds it running
	busy   bool              // a poll is under way
}

func newFollower(s *Server, holder string) *follower {
	return &follower{s: s, holder: holder, runs: map[string]*run{}}
}

// following is the end of a call that runs on at its provider in the background: the call is
// answered (status), and its ticket stays open, holding its estimate, until the follower settles
// it.
func following(c *call, status int, why string) ending {
	return ending{outcome: outcomeOK, status: status, ticket: followTicket, usage: c.estimatedUsage(),
		detail: why + "; it runs in the background at the provider, and is charged when it ends"}
}

// runsInBackground reports whether the call is a background response its provider runs on
// whatever the client does, and whose id the gateway knows, to follow it.
func (c *call) runsInBackground() bool {
	return c.request != nil && c.request.Kept != nil && c.request.Kept.Background && c.response != nil && c.response.ID != ""
}

// start follows the background response r of call c, which holds c's ticket: it records the
// follow in the store, then polls it. A store that cannot record it leaves the follow to this
// gateway alone.
func (f *follower) start(c *call, responseID string) {
	now := time.Now()
	cfg := f.s.policy.Load().Config
	k := kept.Follow{
		ID: responseID, Provider: c.provider(), Model: c.route.Model.Name, Endpoint: string(c.endpoint),
		KeyHash: gatewayv1.HashKey(c.key), Tenant: c.tenant(), TenantID: c.caller.Tenant.Config.ID(), User: c.user(),
		Lease: c.ticket.Lease(), Took: c.ticket.Took(),
		Tokens: c.cost.Tokens, InputTokens: c.cost.InputTokens, OutputTokens: c.cost.OutputTokens,
		MicroDollars: c.cost.MicroDollars, ProviderTokens: c.providerTokens, ServiceTier: c.request.ServiceTier,
		PromptBound: c.route.Model.ContextWindow, CompletionBound: c.estimate.CompletionTokens,
		Started: now, Until: now.Add(cfg.Kept.FollowFor.Duration), Holder: f.holder, HeldUntil: now.Add(cfg.Kept.ReclaimAfter.Duration),
	}
	ctx, cancel := context.WithTimeout(context.Background(), keptTimeout)
	defer cancel()
	if err := f.s.opts.Kept.Follow(ctx, k); err != nil {
		f.s.log.Error("record a background response to follow; only this gateway follows it", "response", responseID, "err", err)
	}
	f.add(&run{f: k, ticket: c.ticket})
}

// add follows r, unless this gateway follows its response already (its own hold lapsed and it
// claimed it back).
func (f *follower) add(r *run) {
	r.next, r.wait = time.Now().Add(firstPoll), 2*firstPoll
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.runs[r.f.ID]; !ok {
		f.runs[r.f.ID] = r
	}
}

// loop polls the responses due, renews the holds and claims the follows whose hold lapsed, until
// ctx ends.
func (f *follower) loop(ctx context.Context) {
	tick := time.NewTicker(followTick)
	defer tick.Stop()
	var lastHold time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if f.s.policy.Load() == nil {
				continue // no configuration yet
			}
			f.pollDue(ctx, now)
			if holdFor := f.holdFor(); now.Sub(lastHold) >= holdFor/3 {
				lastHold = now
				f.hold(ctx, now, holdFor)
				f.claim(ctx, now, holdFor)
			}
		}
	}
}

// holdFor is how long a hold lasts: kept.reclaimAfter. A gateway renews its holds every third of
// it, and claims the follows whose hold lapsed as often.
func (f *follower) holdFor() time.Duration {
	return f.s.policy.Load().Config.Kept.ReclaimAfter.Duration
}

// pollDue starts a poll of each response due one.
func (f *follower) pollDue(ctx context.Context, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		if !r.busy && !now.Before(r.next) {
			r.busy = true
			go f.poll(ctx, r)
		}
	}
}

// hold renews this gateway's holds, and drops the follows another gateway has taken or settled.
func (f *follower) hold(ctx context.Context, now time.Time, holdFor time.Duration) {
	f.mu.Lock()
	ids := make([]string, 0, len(f.runs))
	for id := range f.runs {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, keptTimeout)
	defer cancel()
	lost, err := f.s.opts.Kept.Hold(ctx, f.holder, now.Add(holdFor), ids...)
	if err != nil {
		f.s.log.Warn("renew the holds on background responses", "err", err)
		return
	}
	for _, id := range lost {
		f.drop(id)
	}
}

// claim takes the follows whose gateway stopped holding them.
func (f *follower) claim(ctx context.Context, now time.Time, holdFor time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, keptTimeout)
	defer cancel()
	claimed, err := f.s.opts.Kept.Claim(ctx, f.holder, now, now.Add(holdFor), claimAtOnce)
	if err != nil {
		f.s.log.Warn("claim the background responses of gateways that stopped", "err", err)
		return
	}
	for _, k := range claimed {
		f.s.log.Info("following a background response another gateway stopped following", "response", k.ID, "tenant", k.Tenant, "from", k.Holder)
		f.add(&run{f: k})
	}
}

// drop stops following a response here, its ticket ended without a word to the store: another
// gateway settles it.
func (f *follower) drop(id string) {
	f.mu.Lock()
	r := f.runs[id]
	delete(f.runs, id)
	f.mu.Unlock()
	if r != nil && r.ticket != nil {
		r.ticket.Abandon()
	}
}

// poll reads a response at its provider, and settles it if it has ended or can no longer be
// followed; otherwise it is polled again later.
func (f *follower) poll(ctx context.Context, r *run) {
	defer f.polled(r)
	ended, err := f.read(ctx, r.f)
	switch {
	case err == errResponseGone:
		f.settle(ctx, r, f.bound(r.f), "the response could no longer be read at its provider; it was charged its bound")
	case err != nil && time.Now().After(r.f.Until):
		f.settle(ctx, r, f.bound(r.f), "the response could not be read to its end within kept.followFor; it was charged its bound")
	case err != nil:
		f.s.log.Warn("poll a background response", "response", r.f.ID, "provider", r.f.Provider, "err", err)
	case ended.Final():
		f.settle(ctx, r, f.usageOf(r.f, ended), "")
	case time.Now().After(r.f.Until):
		f.settle(ctx, r, f.bound(r.f), "the response ran past kept.followFor; it was charged its bound")
	}
}

// polled schedules a response's next poll, unless it is no longer followed.
func (f *follower) polled(r *run) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.busy = false
	r.next = time.Now().Add(r.wait)
	r.wait = min(2*r.wait, lastPoll)
}

// errResponseGone stands for a provider's 404 on a followed response: it was deleted.
var errResponseGone = fmt.Errorf("the provider no longer has the response")

// read reads a followed response at its provider, with the gateway's key.
func (f *follower) read(ctx context.Context, k kept.Follow) (estimate.Response, error) {
	p := f.s.policy.Load().Provider(k.Provider)
	if p == nil {
		return estimate.Response{}, fmt.Errorf("the provider %q is no longer configured", k.Provider)
	}
	ctx, cancel := context.WithTimeout(ctx, p.Config.Timeout.Duration)
	defer cancel()
	resp, err := f.s.sendKept(ctx, p, http.MethodGet, "/v1/responses/"+k.ID, "", nil, nil)
	if err != nil {
		return estimate.Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPolledBytes))
	switch {
	case err != nil:
		return estimate.Response{}, err
	case resp.StatusCode == http.StatusNotFound:
		return estimate.Response{}, errResponseGone
	case resp.StatusCode != http.StatusOK:
		return estimate.Response{}, fmt.Errorf("the provider answered %d", resp.StatusCode)
	}
	r, ok := estimate.ParseResponse(body)
	if !ok {
		return estimate.Response{}, fmt.Errorf("the provider's answer is not a response object")
	}
	return r, nil
}

// usageOf is what a response that ended used: its usage within its bound, each class of token
// and its service tier with it, or, when it reports none, the estimate it was admitted at.
func (f *follower) usageOf(k kept.Follow, r estimate.Response) estimate.Usage {
	if r.Usage == nil {
		return estimate.Usage{PromptTokens: max(k.Tokens-k.CompletionBound, 0), CompletionTokens: k.CompletionBound}
	}
	u, _ := r.Usage.Within(estimate.Estimate{MaxPromptTokens: k.PromptBound, CompletionTokens: k.CompletionBound})
	return u
}

// bound is what a response that cannot be followed is charged.
func (f *follower) bound(k kept.Follow) estimate.Usage {
	u := estimate.Usage{PromptTokens: k.PromptBound, CompletionTokens: k.CompletionBound}
	u.TotalTokens = u.Tokens()
	return u
}

// settle ends the follow of a response at usage u, if no other gateway has: the call is charged
// u in place of its estimate, its slots in flight freed, and the tokens a call continuing the
// response carries recorded. A store that cannot finish the follow leaves it to the next poll.
func (f *follower) settle(ctx context.Context, r *run, u estimate.Usage, why string) {
	ctx, cancel := context.WithTimeout(ctx, keptTimeout)
	defer cancel()
	won, err := f.s.opts.Kept.Finish(ctx, r.f.ID)
	if err != nil {
		f.s.log.Warn("finish the follow of a background response", "response", r.f.ID, "err", err)
		return
	}
	f.mu.Lock()
	delete(f.runs, r.f.ID)
	f.mu.Unlock()
	if !won {
		if r.ticket != nil {
			r.ticket.Abandon() // another gateway settled it
		}
		return
	}
	outcome := "settled"
	if why != "" {
		outcome = "bound"
	}
	charged, err := f.charge(ctx, r, u)
	if err != nil {
		outcome = "lost"
		why = fmt.Sprintf("its settlement failed (%v); it stays charged its estimate", err)
	}
	f.s.metrics.backgroundEnded.WithLabelValues(r.f.Tenant, r.f.Provider, outcome).Inc()
	o := kept.Owner{Tenant: r.f.Tenant, TenantID: r.f.TenantID, Provider: r.f.Provider, Context: u.Tokens()}
	if err := f.s.opts.Kept.Own(ctx, o, f.s.policy.Load().Config.Kept.OwnersFor.Duration, r.f.ID); err != nil {
		f.s.log.Warn("record the tokens a background response carries", "response", r.f.ID, "err", err)
	}
	f.log(r.f, u, charged, outcome, why)
}

// charge settles the call at u: through its ticket when this gateway admitted it, under its lease
// otherwise. It returns what the call was charged.
func (f *follower) charge(ctx context.Context, r *run, u estimate.Usage) (policy.Cost, error) {
	if r.ticket != nil {
		r.ticket.Settle(u)
		return r.ticket.Charged(), nil
	}
	req, err := f.request(r.f)
	if err != nil {
		return policy.Cost{}, err
	}
	return f.s.gate.SettleElsewhere(ctx, req, r.f.Lease, r.f.Took, u)
}

// request is the admission request a followed call was admitted as, read back from its follow.
func (f *follower) request(k kept.Follow) (admission.Request, error) {
	p := f.s.policy.Load()
	caller := p.CallerOf(k.KeyHash)
	if caller == nil {
		return admission.Request{}, fmt.Errorf("the key that sent it is no longer configured")
	}
	for _, route := range p.Routes(k.Model) {
		if route.Provider.Name == k.Provider {
			cost := policy.Cost{Tokens: k.Tokens, InputTokens: k.InputTokens, OutputTokens: k.OutputTokens, MicroDollars: k.MicroDollars}
			return admission.Request{Caller: caller, Route: route, Endpoint: gatewayv1.Endpoint(k.Endpoint), Cost: cost,
				ServiceTier: k.ServiceTier, ProviderTokens: k.ProviderTokens}, nil
		}
	}
	return admission.Request{}, fmt.Errorf("the provider %q no longer serves the model %q", k.Provider, k.Model)
}

// log writes a background response's access-log line, at its end.
func (f *follower) log(k kept.Follow, u estimate.Usage, charged policy.Cost, outcome, why string) {
	level := slog.LevelInfo
	if outcome != "settled" {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("response_id", k.ID),
		slog.String("tenant", k.Tenant),
		slog.String("user", k.User),
		slog.String("model", k.Model),
		slog.String("provider", k.Provider),
		slog.String("outcome", outcome),
		slog.Int64("tokens_estimated", k.Tokens),
		slog.Int64("prompt_tokens", u.PromptTokens),
		slog.Int64("completion_tokens", u.CompletionTokens),
		slog.String("cost", string(gatewayv1.MoneyFromMicro(charged.MicroDollars))),
		slog.Int64("duration_ms", time.Since(k.Started).Milliseconds()),
	}
	if why != "" {
		attrs = append(attrs, slog.String("detail", why))
	}
	f.s.log.LogAttrs(context.Background(), level, "background response ended", attrs...)
}
