package kept

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis keys. Each owner is a key of its own, so that owners spread over a Redis Cluster's
// slots; they are read and written with pipelines of single-key commands, which a Cluster client
// splits by slot. The follows live under one hash tag, in one slot, so that a script holds,
// claims or finishes them atomically; they are few (the background responses in progress).
//
//	sluice:kept:owner:<id>           an id's owner, as JSON; it expires with the owner's ttl
//	{sluice-kept}:follows            each follow's JSON by id, without its holder and hold
//	{sluice-kept}:holders            each follow's holder by id
//	{sluice-kept}:held               each follow's id scored by the end of its hold (Unix ms)
//	{sluice-kept}:finished:<id>      the token of the Finish that removed id's follow, for a
//	                                 minute (see finishedFor)
//
// The three follow keys never expire: a follow stays until a gateway finishes it. Redis must
// keep every key (maxmemory-policy noeviction): an evicted follow is a response never settled.
const (
	ownerPrefix  = "sluice:kept:owner:"
	followPrefix = "{sluice-kept}:"
	followsKey   = followPrefix + "follows"
	holdersKey   = followPrefix + "holders"
	heldKey      = followPrefix + "held"
)

// finishedFor is how long Redis remembers which Finish removed a follow: longer than a client
// goes on sending a command again after a timeout.
const finishedFor = time.Minute

func ownerKey(id string) string    { return ownerPrefix + id }
func finishedKey(id string) string { return followPrefix + "finished:" + id }

// Redis keeps owners and follows in Redis, shared by every gateway replica. Its zero value is
// not usable; call NewRedis. It is safe for concurrent use.
type Redis struct {
	client redis.UniversalClient
}

// NewRedis returns a store in the Redis behind client: one server, a primary found through
// Sentinel, or a Cluster.
func NewRedis(client redis.UniversalClient) *Redis {
	return &Redis{client: client}
}

// Own records ids as o's for ttl, kept to the millisecond; an id already recorded is
// overwritten and its ttl renewed.
func (r *Redis) Own(ctx context.Context, o Owner, ttl time.Duration, ids ...string) error {
	if err := checkOwn(o, ttl, ids); err != nil || len(ids) == 0 {
		return err
	}
	value, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("kept: encode the owner: %w", err)
	}
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.Set(ctx, ownerKey(id), value, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kept: record the owners of %d ids: %w", len(ids), err)
	}
	return nil
}

// Owners returns each id's owner, nil for one not recorded or expired, in the order of ids.
func (r *Redis) Owners(ctx context.Context, ids ...string) ([]*Owner, error) {
	gets := make([]*redis.StringCmd, len(ids))
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			if id != "" {
				gets[i] = p.Get(ctx, ownerKey(id))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("kept: read the owners of %d ids: %w", len(ids), err)
	}
	out := make([]*Owner, len(ids))
	for i, get := range gets {
		if out[i], err = decodeOwner(get); err != nil {
			return nil, fmt.Errorf("kept: the owner of %q: %w", ids[i], err)
		}
	}
	return out, nil
}

// decodeOwner returns the owner that get read, nil if it read none or was not sent.
func decodeOwner(get *redis.StringCmd) (*Owner, error) {
	if get == nil {
		return nil, nil
	}
	value, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o Owner
	if err := json.Unmarshal(value, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Forget removes ids' owners.
func (r *Redis) Forget(ctx context.Context, ids ...string) error {
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			if id != "" {
				p.Del(ctx, ownerKey(id))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kept: forget the owners of %d ids: %w", len(ids), err)
	}
	return nil
}

// followKeys are the keys of every script on follows, in this order.
var followKeys = []string{followsKey, holdersKey, heldKey}

// followScript records a follow. KEYS: followKeys. ARGV: its id, its JSON, its holder, the end
// of its hold (ms).
var followScript = redis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
`)

// Follow records f (f.Holder holds it until f.HeldUntil, kept to the millisecond). Recording an
// id followed already replaces it.
func (r *Redis) Follow(ctx context.Context, f Follow) error {
	if err := checkFollow(f); err != nil {
		return err
	}
	holder, heldUntil := f.Holder, f.HeldUntil.UnixMilli()
	f.Holder, f.HeldUntil = "", time.Time{} // kept beside the JSON, where scripts change them
	value, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("kept: encode the follow of %q: %w", f.ID, err)
	}
	if err := followScript.Run(ctx, r.client, followKeys, f.ID, value, holder, heldUntil).Err(); err != nil {
		return fmt.Errorf("kept: record the follow of %q: %w", f.ID, err)
	}
	return nil
}

// followedScript reads a follow: its JSON, its holder and the end of its hold (ms), or nil.
// KEYS: followKeys. ARGV: its id.
var followedScript = redis.NewScript(`
local f = redis.call('HGET', KEYS[1], ARGV[1])
if not f then return false end
return {f, redis.call('HGET', KEYS[2], ARGV[1]) or '', redis.call('ZSCORE', KEYS[3], ARGV[1]) or '0'}
`)

// Followed returns the follow of id, or nil.
func (r *Redis) Followed(ctx context.Context, id string) (*Follow, error) {
	reply, err := followedScript.Run(ctx, r.client, followKeys, id).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kept: read the follow of %q: %w", id, err)
	}
	if len(reply) != 3 {
		return nil, fmt.Errorf("kept: read the follow of %q: %d values; want 3", id, len(reply))
	}
	heldUntil, err := strconv.ParseFloat(reply[2], 64)
	if err != nil {
		return nil, fmt.Errorf("kept: the hold of %q: %w", id, err)
	}
	return decodeFollow(reply[0], reply[1], time.UnixMilli(int64(heldUntil)))
}

// decodeFollow returns the follow of value, held by holder until heldUntil.
func decodeFollow(value, holder string, heldUntil time.Time) (*Follow, error) {
	var f Follow
	if err := json.Unmarshal([]byte(value), &f); err != nil {
		return nil, fmt.Errorf("kept: decode a follow: %w", err)
	}
	f.Holder, f.HeldUntil = holder, heldUntil
	return &f, nil
}

// holdScript extends the holds a holder still holds, never shortening one, and returns the ids
// it does not hold. KEYS: followKeys. ARGV: the holder, the end of the hold (ms), the ids.
var holdScript = redis.NewScript(`
local lost = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if redis.call('HGET', KEYS[2], id) == ARGV[1] then
    if tonumber(redis.call('ZSCORE', KEYS[3], id) or '0') < tonumber(ARGV[2]) then
      redis.call('ZADD', KEYS[3], ARGV[2], id)
    end
  else
    lost[#lost + 1] = id
  end
end
return lost
`)

// Hold extends to until the hold of those of ids that holder still holds, and returns the ids it
// no longer holds (claimed by another, or finished). A hold is never shortened.
func (r *Redis) Hold(ctx context.Context, holder string, until time.Time, ids ...string) ([]string, error) {
	if err := checkHolder(holder); err != nil || len(ids) == 0 {
		return nil, err
	}
	args := make([]any, 0, 2+len(ids))
	args = append(args, holder, until.UnixMilli())
	for _, id := range ids {
		args = append(args, id)
	}
	lost, err := holdScript.Run(ctx, r.client, followKeys, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("kept: hold %d follows: %w", len(ids), err)
	}
	if len(lost) == 0 {
		return nil, nil
	}
	return lost, nil
}

// claimScript gives a holder the follows whose hold lapsed first, before a time, and returns
// their JSON. A lapsed hold without a follow (which no script leaves) is dropped. KEYS:
// followKeys. ARGV: the holder, the time (ms), the end of the new hold (ms), the most to take.
var claimScript = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[4])
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HGET', KEYS[1], id)
  if f then
    redis.call('HSET', KEYS[2], id, ARGV[1])
    redis.call('ZADD', KEYS[3], ARGV[3], id)
    out[#out + 1] = f
  else
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
  end
end
return out
`)

// Claim takes for holder, until until, at most n follows whose hold lapsed before now, those
// that lapsed first first, and returns them (with Holder and HeldUntil as now recorded). now
// and until are kept to the millisecond.
//
// A Claim whose answer is lost (its client timed out) may still have taken follows: they come
// back to a Claim once until has passed.
func (r *Redis) Claim(ctx context.Context, holder string, now, until time.Time, n int) ([]Follow, error) {
	if err := checkHolder(holder); err != nil || n <= 0 {
		return nil, err
	}
	values, err := claimScript.Run(ctx, r.client, followKeys, holder, now.UnixMilli(), until.UnixMilli(), n).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("kept: claim follows: %w", err)
	}
	claimed := make([]Follow, 0, len(values))
	for _, value := range values {
		f, err := decodeFollow(value, holder, toMillisecond(until))
		if err != nil {
			return nil, err
		}
		claimed = append(claimed, *f)
	}
	return claimed, nil
}

// finishScript removes a follow and answers 1 if it was there, or if the same Finish (its
// token) removed it before; else 0. KEYS: followKeys, then the follow's finished key. ARGV: its
// id, the token, how long to remember the token (ms).
var finishScript = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('SET', KEYS[4], ARGV[2], 'PX', ARGV[3])
  return 1
end
if redis.call('GET', KEYS[4]) == ARGV[2] then return 1 end
return 0
`)

// Finish removes the follow of id and reports whether this call removed it. A random token
// names the call, so that when the client sends its command again (after a timeout) and the
// first run removed the follow, the call is still told true.
func (r *Redis) Finish(ctx context.Context, id string) (bool, error) {
	return r.finish(ctx, id, rand.Text())
}

// finish is Finish under the token that names the call.
func (r *Redis) finish(ctx context.Context, id, token string) (bool, error) {
	keys := append(followKeys[:len(followKeys):len(followKeys)], finishedKey(id))
	removed, err := finishScript.Run(ctx, r.client, keys, id, token, finishedFor.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("kept: finish the follow of %q: %w", id, err)
	}
	return removed == 1, nil
}
