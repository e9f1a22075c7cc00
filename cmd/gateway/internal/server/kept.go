package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/kept"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// What a provider keeps of a tenant's calls (stored responses and their items, background runs,
// conversations) it keeps under the one account every tenant calls through. The gateway records
// the tenant of every id it hands out, refuses an id to every other tenant as the provider
// answers an id that is not its own (404), and adds to a call that continues a response or a
// conversation the turns it carries (see readKept).

// readKept reads what a Responses call asks of what its provider keeps, under its tenant's
// providerState: it refuses what the plan does not allow and every kept object the tenant does
// not own, and adds to the call's estimate the earlier turns of the response or conversation it
// continues, which its body does not show. It returns the body to send: with "store": false for
// a plan that keeps nothing.
func (s *Server) readKept(ctx context.Context, c *call, body []byte) ([]byte, *apiError) {
	k := c.request.Kept
	if k == nil {
		return body, nil
	}
	state := c.caller.Tenant.Config.ProviderState
	if apiErr := refusedByPlan(state, k); apiErr != nil {
		return nil, apiErr
	}
	carried, apiErr := s.owned(ctx, c.caller, k.Refs)
	if apiErr != nil {
		return nil, apiErr
	}
	c.estimate.PromptTokens = addTokens(c.estimate.PromptTokens, carried)
	if state == gatewayv1.ProviderStateNoStore && k.Store {
		withoutStore, err := estimate.WithoutStore(body)
		if err != nil {
			return nil, requestError(err)
		}
		return withoutStore, nil
	}
	return body, nil
}

// refusedByPlan is the error that refuses a call asking its provider to keep what the tenant's
// plan does not allow, or nil.
func refusedByPlan(state gatewayv1.ProviderState, k *estimate.Kept) *apiError {
	continues := slices.ContainsFunc(k.Refs, func(r estimate.Ref) bool { return r.Continues() || r.Kind == estimate.RefItem })
	switch {
	case state == gatewayv1.ProviderStateRefuse && k.Store:
		return keptRefused("store", `Your plan keeps nothing at the provider: send "store": false.`)
	case state != gatewayv1.ProviderStateKeep && k.Background:
		return keptRefused("background", "Your plan keeps nothing at the provider, so it runs no response in the background.")
	case state != gatewayv1.ProviderStateKeep && continues:
		return keptRefused("previous_response_id", "Your plan keeps nothing at the provider, so no call continues a stored response or conversation.")
	}
	return nil
}

func keptRefused(param, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "provider_state_refused", Param: &param, Message: message}
}

// owned checks that the caller's tenant owns every kept object refs name (a stored prompt, its
// plan's storedPrompts), and returns the tokens the responses and conversations it continues
// carry. It answers an object the tenant does not own as its provider answers one that does not
// exist, so that no tenant learns what another keeps.
func (s *Server) owned(ctx context.Context, caller *policy.Caller, refs []estimate.Ref) (int64, *apiError) {
	var ids []string
	for _, r := range refs {
		if r.Kind == estimate.RefPrompt {
			if !slices.Contains(caller.Tenant.Config.StoredPrompts, r.ID) {
				return 0, notKept(r)
			}
			continue
		}
		ids = append(ids, r.ID)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	owners, err := s.opts.Kept.Owners(ctx, ids...)
	if err != nil {
		s.log.Error("read the owners of kept objects", "err", err)
		return 0, errKeptUnreadable
	}
	var carried int64
	i := 0
	for _, r := range refs {
		if r.Kind == estimate.RefPrompt {
			continue
		}
		o := owners[i]
		i++
		if o == nil || o.TenantID != caller.Tenant.Config.ID() {
			return 0, notKept(r)
		}
		if r.Continues() {
			carried = addTokens(carried, o.Context)
		}
	}
	return carried, nil
}

// errKeptUnreadable answers a call whose kept objects' owners the store could not read.
var errKeptUnreadable = &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "store_unavailable",
	Message: "The gateway could not read whose the objects this call names are. Try again shortly."}

// notKept is the 404 the provider answers for a kept object that does not exist, as OpenAI words
// it.
func notKept(r estimate.Ref) *apiError {
	param, what := "input", "Item"
	switch r.Kind {
	case estimate.RefResponse:
		return &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "previous_response_not_found", Param: ptr("previous_response_id"),
			Message: fmt.Sprintf("Previous response with id '%s' not found.", r.ID)}
	case estimate.RefConversation:
		param, what = "conversation", "Conversation"
	case estimate.RefPrompt:
		param, what = "prompt", "Prompt"
	case estimate.RefFile:
		what = "File"
	case estimate.RefVectorStore:
		param, what = "tools", "Vector store"
	case estimate.RefContainer:
		param, what = "tools", "Container"
	}
	return &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Param: &param,
		Message: fmt.Sprintf("%s with id '%s' not found.", what, r.ID)}
}

// addTokens is a+b, saturating.
func addTokens(a, b int64) int64 {
	if a > 0 && b > (1<<63-1)-a {
		return 1<<63 - 1
	}
	return a + b
}

// own records the ids a Responses answer handed out (its response's and its output items') as
// the call's tenant's, with the turns a call continuing the response carries: its input and
// output as used (u), or as estimated while it runs in the background. A call that continued a
// conversation leaves the conversation carrying as much. A store that fails leaves the ids
// unowned, which their tenant is then refused: it is logged.
func (s *Server) own(c *call, r *estimate.Response, u estimate.Usage) {
	if r == nil || r.ID == "" || c.caller == nil || !c.request.Kept.Store {
		return // a response the provider does not keep cannot be named again
	}
	ctx, cancel := context.WithTimeout(context.Background(), keptTimeout)
	defer cancel()
	o := kept.Owner{Tenant: c.tenant(), TenantID: c.caller.Tenant.Config.ID(), Provider: c.provider()}
	ttl := s.policy.Load().Config.Kept.OwnersFor.Duration
	err := s.opts.Kept.Own(ctx, o, ttl, r.Items...)
	o.Context = u.Tokens()
	ids := []string{r.ID}
	for _, ref := range c.request.Kept.Refs {
		if ref.Kind == estimate.RefConversation {
			ids = append(ids, ref.ID)
		}
	}
	if ownErr := s.opts.Kept.Own(ctx, o, ttl, ids...); err == nil {
		err = ownErr
	}
	if err != nil {
		s.log.Error("record the tenant of a response; its ids will be refused to it", "response", r.ID, "tenant", o.Tenant, "err", err)
	}
}
