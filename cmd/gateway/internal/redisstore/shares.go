package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
)

// sharesKeep is how long the ledger is kept after its last exchange.
const sharesKeep = time.Hour

// exchangeScript takes in one gateway's updates to a provider's shared ledger and answers the
// count of every lane waiting on some gateway, on Redis's clock. KEYS[1] is a hash of each lane's
// count; KEYS[2] a sorted set of "lane\31gateway" scored by when that gateway's word expires.
// ARGV: the gateway, the TTL and the keep in milliseconds, then per update its lane, served, the
// floor and the ceiling its count is brought within as it starts (empty for none: it keeps its
// count; a lane with no count starts at the floor) and 1 when it waits.
var exchangeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
for i = 4, #ARGV, 5 do
  local lane, served = ARGV[i], tonumber(ARGV[i+1])
  if ARGV[i+2] ~= '' then
    local floor = tonumber(ARGV[i+2])
    local count = tonumber(redis.call('HGET', KEYS[1], lane) or floor)
    count = math.max(floor, math.min(count, tonumber(ARGV[i+3])))
    redis.call('HSET', KEYS[1], lane, string.format('%.17g', count))
  end
  if served ~= 0 then
    redis.call('HINCRBYFLOAT', KEYS[1], lane, ARGV[i+1])
  end
  local entry = lane .. '\31' .. ARGV[1]
  if ARGV[i+4] == '1' then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), entry)
  else
    redis.call('ZREM', KEYS[2], entry)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local out, seen = {}, {}
for _, entry in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local lane = string.match(entry, '^(.*)\31[^\31]*$')
  if not seen[lane] then
    seen[lane] = true
    out[#out + 1] = lane
    out[#out + 1] = redis.call('HGET', KEYS[1], lane) or '0'
  end
end
return out
`)

// Shares is the shared ledger of the fair queues of the gateways sharing a Redis (see package
// fairshare). The zero value is not usable; call NewShares. It is safe for concurrent use.
type Shares struct {
	client  redis.UniversalClient
	gateway string
}

// NewShares returns the shared ledger in client's Redis, as seen by the gateway named gateway
// (unique to its process).
func NewShares(client redis.UniversalClient, gateway string) *Shares {
	return &Shares{client: client, gateway: gateway}
}

// Exchange tells the ledger of provider's queue what this gateway served and which of its lanes
// wait, its word that they wait holding for ttl (a gateway that died stops holding the others'
// lanes back after it), and returns the count of every lane waiting on some gateway.
func (s *Shares) Exchange(ctx context.Context, provider string, ups []fairshare.Update, ttl time.Duration) (fairshare.Standing, error) {
	tag := "{sluice-shares:" + provider + "}"
	args := make([]any, 0, 3+5*len(ups))
	args = append(args, s.gateway, ttl.Milliseconds(), sharesKeep.Milliseconds())
	for _, u := range ups {
		waiting := 0
		if u.Waiting {
			waiting = 1
		}
		var floor, ceiling any = "", "" // the count stays
		if u.Starts {
			floor, ceiling = u.Floor, u.Ceiling
		}
		args = append(args, string(u.Member), u.Served, floor, ceiling, waiting)
	}
	out, err := exchangeScript.Run(ctx, s.client, []string{tag + ":served", tag + ":waiting"}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: exchange the shares of %q: %w", provider, err)
	}
	st := make(fairshare.Standing, len(out)/2)
	for i := 0; i+1 < len(out); i += 2 {
		v, err := strconv.ParseFloat(out[i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("redisstore: the shares of %q: lane %q counts %q: %w", provider, out[i], out[i+1], err)
		}
		st[fairshare.Member(out[i])] = v
	}
	return st, nil
}
