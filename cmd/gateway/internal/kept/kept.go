// Package kept records what the gateway must know of the objects a provider keeps for it, which
// every tenant reaches through one upstream account: which tenant owns each id the gateway handed
// out (a stored response, its items, a conversation, a file), and the background responses the
// gateway follows to their end to settle their usage, from whichever replica is still alive.
package kept

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Owner is whose a kept object is, and what the gateway knows of it.
type Owner struct {
	Tenant   string `json:"tenant"`   // the tenant's name, for logs
	TenantID string `json:"tenantID"` // identifies the tenant (its UID, or its name when it has none): compare this
	Provider string `json:"provider"` // the provider that keeps the object
	// Context is the tokens a call that continues the object (a response, a conversation)
	// carries from it: its input and output as settled.
	Context int64 `json:"context,omitempty"`
}

// Follow is a background response the gateway follows to its end, with what it needs to settle
// it from any replica. The stores keep HeldUntil to the millisecond.
type Follow struct {
	ID       string    `json:"id"` // the response's id
	Provider string    `json:"provider"`
	Model    string    `json:"model"` // the model's name in the configuration (route)
	Endpoint string    `json:"endpoint"`
	KeyHash  string    `json:"keyHash"` // SHA-256 (hex) of the caller's key, never the key
	Tenant   string    `json:"tenant"`
	TenantID string    `json:"tenantID"`
	User     string    `json:"user,omitempty"`
	Lease    string    `json:"lease"` // the call's lease id, which names its settlement
	Took     time.Time `json:"took"`  // when the store took the decision that let it go

	// What its admission charged, and the service tier it asked for, at which it is charged when
	// its answer names none.
	Tokens         int64  `json:"tokens"`
	InputTokens    int64  `json:"inputTokens,omitempty"`
	OutputTokens   int64  `json:"outputTokens,omitempty"`
	MicroDollars   int64  `json:"microDollars"`
	ProviderTokens int64  `json:"providerTokens"`
	ServiceTier    string `json:"serviceTier,omitempty"`
	// What it is settled at if it cannot be followed.
	PromptBound     int64 `json:"promptBound"`
	CompletionBound int64 `json:"completionBound"`

	Started   time.Time `json:"started"`
	Until     time.Time `json:"until"`     // followed until then; past it, settled at its bound
	Holder    string    `json:"holder"`    // the gateway following it
	HeldUntil time.Time `json:"heldUntil"` // its hold; past it, another gateway may claim it
}

// Store keeps owners and follows. An empty id is never recorded: Own and Follow refuse it, and
// the other methods treat it as an id not recorded.
type Store interface {
	// Own records ids as o's for ttl; an id already recorded is overwritten and its ttl renewed.
	Own(ctx context.Context, o Owner, ttl time.Duration, ids ...string) error
	// Owners returns each id's owner, nil for one not recorded or expired, in the order of ids.
	Owners(ctx context.Context, ids ...string) ([]*Owner, error)
	// Forget removes ids' owners.
	Forget(ctx context.Context, ids ...string) error

	// Follow records f (f.Holder holds it until f.HeldUntil). Recording an id followed already
	// replaces it.
	Follow(ctx context.Context, f Follow) error
	// Followed returns the follow of id, or nil.
	Followed(ctx context.Context, id string) (*Follow, error)
	// Hold extends to until the hold of those of ids that holder still holds, and returns the
	// ids it no longer holds (claimed by another, or finished). A hold is never shortened.
	Hold(ctx context.Context, holder string, until time.Time, ids ...string) (lost []string, err error)
	// Claim takes for holder, until until, at most n follows whose hold lapsed before now,
	// those that lapsed first first, and returns them (with Holder and HeldUntil as now
	// recorded). Two gateways claiming at once never both get the same follow. Holds are
	// compared on the callers' clocks, so a hold must outlast the skew between gateways' clocks.
	Claim(ctx context.Context, holder string, now, until time.Time, n int) ([]Follow, error)
	// Finish removes the follow of id and reports whether this call removed it: of every gateway
	// that finishes one follow, exactly one is told true, and that one settles it.
	Finish(ctx context.Context, id string) (bool, error)
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
)

var (
	errEmptyID     = errors.New("kept: an id is empty")
	errNoTenant    = errors.New("kept: an owner needs a tenant id")
	errEmptyHolder = errors.New("kept: a hold needs a holder")
)

// checkOwn reports why Own must refuse o, ttl and ids, if it must.
func checkOwn(o Owner, ttl time.Duration, ids []string) error {
	switch {
	case o.TenantID == "":
		return errNoTenant
	case ttl <= 0:
		return fmt.Errorf("kept: ttl %s is not positive", ttl)
	}
	for _, id := range ids {
		if id == "" {
			return errEmptyID
		}
	}
	return nil
}

// checkFollow reports why Follow must refuse f, if it must.
func checkFollow(f Follow) error {
	if f.ID == "" {
		return errEmptyID
	}
	return checkHolder(f.Holder)
}

func checkHolder(holder string) error {
	if holder == "" {
		return errEmptyHolder
	}
	return nil
}

// toMillisecond returns t without what is finer than a millisecond, as the stores keep a hold.
func toMillisecond(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
