package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
)

// sharesKeep is how long the ledger is kept after its last exchange.
const sharesKeep = time.Hour

// exchangeScript takes in one gateway's updates to a provider's shared ledger and its backlog, and
// answers the count of every lane waiting on some gateway and the backlog of every other gateway,
// on Redis's clock. KEYS[1] is a hash of each lane's count; KEYS[2] a sorted set of
// "lane\31gateway" scored by when that gateway's word expires; KEYS[3] a hash of each gateway's
// backlog (fairqueue.Backlog in JSON) and KEYS[4] a sorted set of the gateways scored by when their
// backlog's word expires. ARGV: the gateway, the TTL and the keep in milliseconds, its backlog
// (empty for none), then per update its lane, served, the floor and the ceiling its count is
// brought within as it starts (empty for none: it keeps its count; a lane with no count starts at
// the floor) and 1 when it waits. The answer: lane and count pairs, then the other gateways'
// backlogs.
var exchangeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
for _, gateway in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
  redis.call('HDEL', KEYS[3], gateway)
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), ARGV[1])
else
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
for i = 5, #ARGV, 5 do
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
for k = 1, 4 do
  redis.call('PEXPIRE', KEYS[k], ARGV[3])
end
local out, seen = {}, {}
for _, entry in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local lane = string.match(entry, '^(.*)\31[^\31]*$')
  if not seen[lane] then
    seen[lane] = true
    out[#out + 1] = lane
    out[#out + 1] = redis.call('HGET', KEYS[1], lane) or '0'
  end
end
local others = {}
for _, gateway in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if gateway ~= ARGV[1] then
    others[#others + 1] = redis.call('HGET', KEYS[3], gateway) or ''
  end
end
return {out, others}
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

// Exchange tells the ledger of provider's queue what this gateway served, which of its lanes
// wait and what waits here, its word holding for ttl (a gateway that died stops holding the
// others' lanes back after it), and returns the count of every lane waiting on some gateway and
// what waits on each other gateway.
func (s *Shares) Exchange(ctx context.Context, provider string, ups []fairshare.Update, mine fairqueue.Backlog, ttl time.Duration) (fairshare.Standing, []fairqueue.Backlog, error) {
	tag := "{sluice-shares:" + provider + "}"
	args := make([]any, 0, 4+5*len(ups))
	backlog := "" // none
	if mine.Waiting() {
		text, err := json.Marshal(mine)
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: exchange the shares of %q: %w", provider, err)
		}
		backlog = string(text)
	}
	args = append(args, s.gateway, ttl.Milliseconds(), sharesKeep.Milliseconds(), backlog)
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
	keys := []string{tag + ":served", tag + ":waiting", tag + ":backlog", tag + ":backlogs"}
	answer, err := exchangeScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: exchange the shares of %q: %w", provider, err)
	}
	if len(answer) != 2 {
		return nil, nil, fmt.Errorf("redisstore: the shares of %q: an answer of %d parts", provider, len(answer))
	}
	st, err := standingOf(provider, answer[0])
	if err != nil {
		return nil, nil, err
	}
	elsewhere, err := backlogsOf(provider, answer[1])
	return st, elsewhere, err
}

// standingOf reads the lane and count pairs of an exchange's answer.
func standingOf(provider string, v any) (fairshare.Standing, error) {
	out, _ := v.([]any)
	st := make(fairshare.Standing, len(out)/2)
	for i := 0; i+1 < len(out); i += 2 {
		lane, _ := out[i].(string)
		count, _ := out[i+1].(string)
		v, err := strconv.ParseFloat(count, 64)
		if err != nil {
			return nil, fmt.Errorf("redisstore: the shares of %q: lane %q counts %q: %w", provider, lane, count, err)
		}
		st[fairshare.Member(lane)] = v
	}
	return st, nil
}

// backlogsOf reads the other gateways' backlogs of an exchange's answer.
func backlogsOf(provider string, v any) ([]fairqueue.Backlog, error) {
	out, _ := v.([]any)
	backlogs := make([]fairqueue.Backlog, len(out))
	for i, e := range out {
		text, _ := e.(string)
		if err := json.Unmarshal([]byte(text), &backlogs[i]); err != nil {
			return nil, fmt.Errorf("redisstore: the shares of %q: a backlog %q: %w", provider, text, err)
		}
	}
	return backlogs, nil
}
