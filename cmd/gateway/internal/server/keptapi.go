package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/kept"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// The Responses API's own endpoints (a response read, resumed as a stream, cancelled, deleted,
// its input items listed) and the Conversations API are served to the tenant that owns the
// object they name, at the provider that keeps it, with the gateway's key; to any other tenant
// they answer 404, as the provider answers an id that is not its own, and reach no provider. A
// conversation is made at the first provider of the caller's plan. They take nothing from the
// limits: they are not calls to a model.

// The kinds of kept object the API serves, as the provider names them in its errors.
const (
	keptResponse     = "Response"
	keptConversation = "Conversation"
)

// serveKeptObject serves a call on the kept object of kind its path names by {id}.
func (s *Server) serveKeptObject(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k := keptCall{s: s, w: w, r: r, arrived: time.Now()}
		p := s.policy.Load()
		caller, apiErr := s.authenticate(p, r)
		if apiErr != nil {
			apiErr.write(w)
			return
		}
		k.caller = caller
		id := r.PathValue("id")
		owner, apiErr := s.ownerOf(r.Context(), caller, kind, id)
		if apiErr != nil {
			k.fail(apiErr, apiErr.Message)
			return
		}
		if k.provider = p.Provider(owner.Provider); k.provider == nil {
			k.fail(keptNotFound(kind, id), "its provider is no longer configured")
			return
		}
		status := k.pass(nil)
		if r.Method == http.MethodDelete && status == http.StatusOK && r.PathValue("item") == "" {
			s.forget(id)
		}
	}
}

// serveNewConversation makes a conversation at the first provider of the caller's plan, and
// records it as the caller's tenant's.
func (s *Server) serveNewConversation(w http.ResponseWriter, r *http.Request) {
	k := keptCall{s: s, w: w, r: r, arrived: time.Now()}
	p := s.policy.Load()
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	k.caller, k.provider = caller, p.Provider(caller.Tenant.Config.Providers[0])
	if caller.Tenant.Config.ProviderState != gatewayv1.ProviderStateKeep {
		apiErr = keptRefused("conversation", "Your plan keeps nothing at the provider, so it makes no conversation.")
		k.fail(apiErr, apiErr.Message)
		return
	}
	k.pass(func(answer []byte) {
		var made struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(answer, &made) == nil && made.ID != "" {
			s.ownObject(caller, k.provider, made.ID)
		}
	})
}

// ownerOf returns the owner of the kept object id, or the 404 that answers a caller whose tenant
// does not own it.
func (s *Server) ownerOf(ctx context.Context, caller *policy.Caller, kind, id string) (*kept.Owner, *apiError) {
	owners, err := s.opts.Kept.Owners(ctx, id)
	if err != nil {
		s.log.Error("read the owner of a kept object", "err", err)
		return nil, errKeptUnreadable
	}
	if o := owners[0]; o != nil && o.TenantID == caller.Tenant.Config.ID() {
		return o, nil
	}
	return nil, keptNotFound(kind, id)
}

// keptNotFound is the provider's 404 for a response or a conversation that does not exist.
func keptNotFound(kind, id string) *apiError {
	return &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Message: kind + " with id '" + id + "' not found."}
}

// keptCall is a call on a kept object, from its client to its provider.
type keptCall struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	caller   *policy.Caller
	provider *policy.Provider
	arrived  time.Time
}

// fail answers the call with e, logged with detail.
func (k *keptCall) fail(e *apiError, detail string) {
	k.log(e.status, detail)
	e.write(k.w)
}

// pass sends the call to its provider and passes the answer on, a resumed stream as it arrives.
// made, when set, reads a 200's body whole first (a new object's), before it passes on. It
// returns the status the client was answered.
func (k *keptCall) pass(made func(answer []byte)) int {
	var body []byte
	query, apiErr := k.query()
	if apiErr == nil && k.r.Method == http.MethodPost {
		body, apiErr = readBody(k.s.policy.Load(), k.r)
	}
	if apiErr != nil {
		k.fail(apiErr, apiErr.Message)
		return apiErr.status
	}
	resp, err := k.s.sendKept(k.r.Context(), k.provider, k.r.Method, k.r.URL.Path, query, k.r.Header, body)
	if err != nil {
		e := &apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_unreachable", Message: "The provider could not be reached."}
		if errors.Is(err, errProviderCredentials) {
			e.Code, e.Message = "provider_auth_failed", "The gateway's credentials for this provider were refused."
		}
		k.fail(e, err.Error())
		return e.status
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		replaceServerError(resp, (*apiError).body)
	}
	if made != nil && resp.StatusCode == http.StatusOK {
		answer, err := io.ReadAll(io.LimitReader(resp.Body, maxPolledBytes))
		if err != nil {
			k.fail(&apiError{status: http.StatusBadGateway, Type: typeServer, Code: "provider_bad_answer", Message: "The provider's answer broke off."}, err.Error())
			return http.StatusBadGateway
		}
		made(answer)
		resp.Body = io.NopCloser(bytes.NewReader(answer))
	}
	passHeaders(k.w.Header(), resp.Header)
	k.w.WriteHeader(resp.StatusCode)
	k.log(resp.StatusCode, "")
	client := newClientWriter(k.w, k.s.policy.Load().Config.Server.WriteTimeout.Duration, resp.ContentLength == -1)
	if resp.ContentLength == -1 {
		client.flush()
	}
	if err := passBody(client, resp); err != nil && client.err == nil && k.r.Context().Err() == nil {
		panic(http.ErrAbortHandler) // the answer broke off: the client must not take it for all of it
	}
	return resp.StatusCode
}

// query is the call's query: its URL's, and for a GET with a body, the body's parameters, which
// the OpenAI Go SDK sends a stream's resumption in ({"stream": true}). A provider receives them
// in the query, where the API documents them; a GET's body that holds anything else is refused.
func (k *keptCall) query() (string, *apiError) {
	if k.r.Method != http.MethodGet || k.r.ContentLength == 0 {
		return k.r.URL.RawQuery, nil
	}
	raw, err := io.ReadAll(io.LimitReader(k.r.Body, maxQueryBody+1))
	var params map[string]json.RawMessage
	if err != nil || len(raw) > maxQueryBody || (len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &params) != nil) {
		return "", badRequest("invalid_request", "A GET's body, when it has one, must be a JSON object of its query's parameters.")
	}
	q := k.r.URL.Query()
	for name, value := range params {
		v, ok := queryValue(value)
		if !queryParams[name] || !ok {
			e := badRequest("invalid_request", fmt.Sprintf("The parameter %q cannot be given in a GET's body.", name))
			e.Param = &name
			return "", e
		}
		q.Set(name, v)
	}
	return q.Encode(), nil
}

// maxQueryBody bounds the body of a GET.
const maxQueryBody = 4 << 10

// queryParams are the parameters a GET's body may give: a response's resumption as a stream.
var queryParams = map[string]bool{"stream": true, "starting_after": true, "include_obfuscation": true}

// queryValue is a JSON boolean, number or string as a query's value.
func queryValue(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case bool, float64:
		return string(bytes.TrimSpace(raw)), true
	case string:
		return v, true
	}
	return "", false
}

// log writes the call's access-log line.
func (k *keptCall) log(status int, detail string) {
	provider := ""
	if k.provider != nil {
		provider = k.provider.Name
	}
	attrs := []slog.Attr{
		slog.String("request_id", k.w.Header().Get(headerRequestID)),
		slog.String("tenant", tenantName(k.caller)),
		slog.String("user", k.caller.User),
		slog.String("method", k.r.Method),
		slog.String("path", k.r.URL.Path),
		slog.String("provider", provider),
		slog.Int("status", status),
		slog.Int64("duration_ms", time.Since(k.arrived).Milliseconds()),
	}
	if detail != "" {
		attrs = append(attrs, slog.String("detail", detail))
	}
	k.s.log.LogAttrs(k.r.Context(), slog.LevelInfo, "kept object call ended", attrs...)
}

// sendKept sends a call on a kept object to provider, at path of the gateway's API with query,
// with the headers of in that forwardedHeaders allows and the provider's key. A provider that
// refuses the gateway's key is errProviderCredentials: its answer may quote the key.
func (s *Server) sendKept(ctx context.Context, provider *policy.Provider, method, path, query string, in http.Header, body []byte) (*http.Response, error) {
	return s.sendProvider(ctx, provider, method, path, query, providerHeaders(in, provider), body)
}

// sendProvider sends a call to provider, at path of the gateway's API with query, with headers h
// (see providerHeaders: the provider's key among them). A provider that refuses the gateway's key
// is errProviderCredentials: its answer may quote the key.
func (s *Server) sendProvider(ctx context.Context, provider *policy.Provider, method, path, query string, h http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.URL = keptTarget(s.currentEndpoints(provider), path, query)
	req.Host = req.URL.Host
	req.Header = h
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
		req.Header.Del("Content-Type")
	}
	resp, err := s.transport(provider).RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		resp.Body.Close()
		return nil, errProviderCredentials
	}
	return resp, nil
}

// keptTarget is the URL of path, of the gateway's API, at the first of a provider's endpoints.
func keptTarget(endpoints []*url.URL, path, query string) *url.URL {
	if len(endpoints) == 0 {
		return &url.URL{Scheme: "http", Path: path}
	}
	base := endpoints[0]
	return &url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path + strings.TrimPrefix(path, "/v1"), RawQuery: query}
}

// ownObject records a kept object made for caller at provider as its tenant's.
func (s *Server) ownObject(caller *policy.Caller, provider *policy.Provider, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), keptTimeout)
	defer cancel()
	o := kept.Owner{Tenant: caller.Tenant.Name, TenantID: caller.Tenant.Config.ID(), Provider: provider.Name}
	if err := s.opts.Kept.Own(ctx, o, s.policy.Load().Config.Kept.OwnersFor.Duration, id); err != nil {
		s.log.Error("record the tenant of a kept object; it will be refused to it", "id", id, "tenant", o.Tenant, "err", err)
	}
}

// forget drops the owner of a kept object its provider deleted.
func (s *Server) forget(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), keptTimeout)
	defer cancel()
	if err := s.opts.Kept.Forget(ctx, id); err != nil {
		s.log.Warn("forget the owner of a deleted object", "id", id, "err", err)
	}
}
