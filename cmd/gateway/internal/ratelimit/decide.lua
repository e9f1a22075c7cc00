-- One limiter decision (or settlement) over every key of a request, atomically.
--
-- KEYS: one per check.
-- ARGV[1]: now in microseconds, or '' to use Redis's own clock (the same for every replica).
-- ARGV[2]: 'decide' (take every cost or none) or 'settle' (add every cost without checking).
-- Then five values per check: kind, capacity, p1, p2, cost.
--   'b' bucket:      p1 = microseconds to earn one unit; the value is the theoretical arrival time.
--   'w' window:      p1 = end of the current window by the caller's clock, p2 = end of the next
--                    (microseconds); the value is "end used".
--   'c' concurrency: p1 = lease time to live (microseconds), p2 = lease id; the value is a sorted
--                    set of leases scored by expiry, so a dead gateway's slots free themselves.
-- Returns {allowed, refused index (0-based, -1 for none), wait, never, remaining..., reset...},
-- times in microseconds.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local settling = ARGV[2] == 'settle'
local n = #KEYS
-- Every bucket's and window's value in one call (a sorted set reads as nil here).
local values = redis.call('MGET', unpack(KEYS))

local function ms(us)
  return math.max(math.ceil(us / 1000), 1)
end

-- The state of check i: a bucket's arrival time; a window's end and use; a concurrency count.
local function load(i, kind, p1, p2)
  local key = KEYS[i]
  if kind == 'b' then
    return tonumber(values[i] or 0), 0
  elseif kind == 'w' then
    local e, u = 0, 0
    local v = values[i]
    if v then
      local sep = string.find(v, ' ', 1, true)
      e, u = tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
    end
    if now >= e then
      e, u = tonumber(p1), 0
      if now >= e then e = tonumber(p2) end
    end
    return e, u
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return 0, redis.call('ZCARD', key)
end

local function store(i, kind, a, b, p1, p2, delta)
  local key = KEYS[i]
  if kind == 'b' then
    if a > now then redis.call('SET', key, a, 'PX', ms(a - now)) else redis.call('DEL', key) end
  elseif kind == 'w' then
    redis.call('SET', key, string.format('%.0f %.0f', a, b), 'PX', ms(a - now))
  elseif delta > 0 then
    redis.call('ZADD', key, now + tonumber(p1), p2)
    redis.call('PEXPIRE', key, ms(tonumber(p1)))
  elseif delta < 0 then
    redis.call('ZREM', key, p2)
  end
end

-- evaluate returns ok, never, wait, remaining, reset and the new state (a, b).
local function evaluate(kind, cap, p1, a, b, cost)
  if cost > cap then
    return false, true, 0, 0, 0, a, b -- waiting will not help
  end
  if kind == 'b' then
    local interval = tonumber(p1)
    local tolerance = cap * interval
    local tat = math.max(a, now)
    local nxt = tat + cost * interval
    local earliest = nxt - tolerance
    if earliest > now then
      return false, cost > cap, earliest - now, math.floor(math.max(tolerance - (tat - now), 0) / interval), tat - now, a, b
    end
    return true, false, 0, math.floor((tolerance - (nxt - now)) / interval), nxt - now, nxt, 0
  end
  local reset = 0
  if kind == 'w' then reset = a - now end
  if b + cost > cap then
    local wait = 0
    if kind == 'w' then wait = reset end
    return false, cost > cap, wait, math.max(cap - b, 0), reset, a, b
  end
  return true, false, 0, cap - b - cost, reset, a, b + cost
end

local function arg(i, j)
  return ARGV[2 + (i - 1) * 5 + j]
end

if settling then
  for i = 1, n do
    local kind, cap, p1, p2 = arg(i, 1), tonumber(arg(i, 2)), arg(i, 3), arg(i, 4)
    local delta = math.min(math.max(tonumber(arg(i, 5)), -4 * cap), 4 * cap)
    local a, b = load(i, kind, p1, p2)
    if kind == 'b' then
      a = math.max(math.max(a, now) + delta * tonumber(p1), now)
    elseif kind == 'w' then
      b = math.max(b + delta, 0)
    end
    store(i, kind, a, b, p1, p2, delta)
  end
  return {}
end

local allowed, refused, wait, never = 1, -1, 0, 0
local passed, remaining, resets, nexta, nextb = {}, {}, {}, {}, {}
for i = 1, n do
  local kind, cap, p1, p2, cost = arg(i, 1), tonumber(arg(i, 2)), arg(i, 3), arg(i, 4), tonumber(arg(i, 5))
  local a, b = load(i, kind, p1, p2)
  local ok, nev, w, rem, reset, na, nb = evaluate(kind, cap, p1, a, b, cost)
  passed[i], remaining[i], resets[i], nexta[i], nextb[i] = ok, rem, reset, na, nb
  if not ok then
    if allowed == 1 then allowed, refused = 0, i - 1 end
    wait = math.max(wait, w)
    if nev then never = 1 end
  end
end

local reply = {allowed, refused, wait, never}
for i = 1, n do
  local cost = tonumber(arg(i, 5))
  if allowed == 1 then
    store(i, arg(i, 1), nexta[i], nextb[i], arg(i, 3), arg(i, 4), cost)
  elseif passed[i] then
    -- Nothing was taken: a check that passed reports what it has before this request.
    remaining[i] = remaining[i] + cost
  end
  reply[3 + 2 * i] = remaining[i]
  reply[4 + 2 * i] = resets[i]
end
return reply
