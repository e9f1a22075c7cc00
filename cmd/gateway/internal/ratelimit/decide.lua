-- A batch of limiter runs, in order, each atomic: a decision takes every cost or none; a
-- settlement adds every cost without checking, once per settlement id; an undo gives back what a
-- decision took; a renewal pushes back the expiry of the leases still held. Concurrent callers'
-- runs share one script run, so that the keys they have in common are read and written once. On
-- Redis Cluster every key of one script run carries one hash tag; on one primary they need not.
--
-- KEYS: the batch's distinct keys.
-- ARGV, per run: now in microseconds, or '' for Redis's own clock (the same for every replica);
-- 'decide', 'settle', 'undo' or 'renew'; the number of checks; the index in KEYS of the settlement's mark
-- (0 for none) and how long to keep it (milliseconds); then six values per check: the index of its
-- key in KEYS, kind, capacity, p1, p2, cost.
--   'b' bucket:      p1 = microseconds to earn one unit; p2 = the largest cost a full bucket lets
--                    pass, into debt ('' for its capacity: a pace's is larger); the value is the
--                    theoretical arrival time, and for a pace whose requests within its burst
--                    wait for an earlier one (its debt is left to requests past the burst), that
--                    one after a space.
--   'w' window:      p1 = end of the current window by the caller's clock, p2 = end of the next
--                    (microseconds); the value is "end used".
--   'r' rolling:     p1 = "width slots", a slot's length (microseconds) and how many slots make
--                    the period; p2 = '' for a decision. The value is "newest count older
--                    count ...": the newest slot (its start over the slot's length), what it
--                    counts, what the slots before it count in all, then what each of them
--                    counts, newest first, down to the oldest that counts anything. A decision
--                    counts every slot from slot-slots (partly past) to the newest, so no span of
--                    the period passes the capacity; it takes from its own slot, or from the
--                    newest if the clock stepped back. A settlement or an undo carries in p2 when
--                    its decision was taken (or '' for the current slot) and adds to the slot
--                    that decision took from, while it still counts, none going below zero.
--   'c' concurrency: p1 = lease time to live (microseconds), p2 = lease id; the value is a sorted
--                    set of leases scored by expiry, so a dead gateway's slots free themselves.
--   'm' mark:        a scope's record version (see record.go); cost = the version it must hold
--                    at least. It passes or refuses, and nothing here writes it.
-- A settlement whose mark exists was applied before and does nothing; one that applies sets it.
-- An undo is a settlement whose window checks carry, in p1 and p2, the end of the window the
-- decision took from: a window gives back only to it, never to the next one.
-- Returns, for each decision in turn (settlements, undos and renewals return nothing): allowed,
-- refused index (0-based, -1 for none), wait, never, the decision's now, then remaining and reset
-- per check; times in microseconds.
--
-- Nothing is written until every run has been evaluated: a script that Redis stops with an error
-- (a key of the wrong type) has changed nothing but dropping expired leases, so its runs can be
-- sent again.
--
-- The script runs for every decision, so it is written for speed: globals are read once into
-- locals, each distinct argument string is converted to a number once (Lua's tonumber is slow),
-- and the tables it works in are made once.

local tonumber, max, min, floor, ceil, call, ARGV, KEYS =
  tonumber, math.max, math.min, math.floor, math.ceil, redis.call, ARGV, KEYS

local numbers = {}
local function num(s)
  local v = numbers[s]
  if v == nil then
    v = tonumber(s)
    numbers[s] = v
  end
  return v
end

local redisNow
local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  if not redisNow then
    local t = call('TIME')
    redisNow = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return redisNow
end

-- Every bucket's and window's value in one call (a sorted set reads as nil here).
local values = call('MGET', unpack(KEYS))

-- The state of each key as the batch goes: a bucket's arrival time in a; a window's end in a and
-- use in b; a rolling window's newest slot in a and its counts by slot in b; a concurrency count
-- in b. written[k] holds the now of a bucket's or window's last change, to store; leases[k][lease]
-- a lease's new expiry, or false once released; ttls[k] the lease time to live to set on the key;
-- shapes[k] a rolling window's p1.
local sa, sb, kinds, written, leases, ttls, shapes = {}, {}, {}, {}, {}, {}, {}
-- marks[k] holds how long to keep settlement mark k (milliseconds) once it is to be set.
local marks = {}

local function ms(us)
  return max(ceil(us / 1000), 1)
end

-- shape returns a rolling window's slot length and slot count from its p1, "width slots".
local parsedShapes = {}
local function shape(p1)
  local v = parsedShapes[p1]
  if v == nil then
    local sep = string.find(p1, ' ', 1, true)
    v = {tonumber(string.sub(p1, 1, sep - 1)), tonumber(string.sub(p1, sep + 1))}
    parsedShapes[p1] = v
  end
  return v[1], v[2]
end

-- parseRolling returns a rolling window's newest slot and its counts by slot from its value. A
-- value of another form (a bucket's, from before the limit was a rolling window) counts nothing.
-- It reads the newest slot, its count and the sum of the older counts at once, and the older
-- counts themselves only when a decision needs them (see olderCounts): while the clock stays in
-- the newest slot, the sum is all a decision needs. Beside the counts, the table keeps top, the
-- newest slot as read; tail, the older counts as stored; stored, their sum; parsed, whether they
-- have been read; changed, whether one of them has changed since; and from, to and sum, what the
-- slots from up to, not including, to count, so that a batch's decisions in one slot sum the
-- older slots once.
local function parseRolling(v)
  local first = v and string.find(v, ' ', 1, true)
  local second = first and string.find(v, ' ', first + 1, true)
  if not second then return 0, {parsed = true} end
  local third = string.find(v, ' ', second + 1, true)
  local newest = tonumber(string.sub(v, 1, first - 1))
  local counts = {[newest] = tonumber(string.sub(v, first + 1, second - 1))}
  counts.top, counts.stored = newest, tonumber(string.sub(v, second + 1, (third or 0) - 1))
  counts.tail = third and string.sub(v, third) or ''
  counts.parsed = third == nil
  return newest, counts
end

-- olderCounts reads the older counts of a rolling window's value into its counts b, once.
local function olderCounts(b)
  if not b.parsed then
    local j = b.top - 1
    for field in string.gmatch(b.tail, '%S+') do
      b[j] = tonumber(field)
      j = j - 1
    end
    b.parsed = true
  end
end

-- olderSum returns what the slots of counts b from up to, not including, to count. The sum read
-- with the value serves while no older slot has changed and none has left the window: every
-- older slot stored is at least the newest less slots.
local function olderSum(b, from, to, slots)
  if b.from ~= from or b.to ~= to then
    local sum = 0
    if b.top and to == b.top and from <= to - slots and not b.changed then
      sum = b.stored
    else
      olderCounts(b)
      for j = from, to - 1 do sum = sum + (b[j] or 0) end
    end
    b.from, b.to, b.sum = from, to, sum
  end
  return b.sum
end

local function load(k, kind, now)
  kinds[k] = kind
  local v = values[k]
  if kind == 'b' then
    sa[k], sb[k] = 0, 0
    if v then
      local sep = string.find(v, ' ', 1, true)
      if sep then -- a pace's two times; a value of another form (a rolling window's) reads as full
        sa[k] = tonumber(string.sub(v, 1, sep - 1)) or 0
        sb[k] = tonumber(string.sub(v, sep + 1)) or sa[k]
      else
        sa[k] = tonumber(v) or 0
        sb[k] = sa[k]
      end
    end
  elseif kind == 'w' then
    sa[k], sb[k] = 0, 0
    if v then
      local sep = string.find(v, ' ', 1, true)
      sa[k], sb[k] = tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
    end
  elseif kind == 'r' then
    sa[k], sb[k] = parseRolling(v)
  elseif kind == 'm' then
    sa[k], sb[k] = v and tonumber(v) or -1, 0
  else
    call('ZREMRANGEBYSCORE', KEYS[k], '-inf', now)
    sa[k], sb[k] = 0, call('ZCARD', KEYS[k])
  end
end

-- state returns key k's state as a check of this kind sees it at now: a window past its end rolls.
local function state(k, kind, p1, p2, now)
  if not kinds[k] then load(k, kind, now) end
  local a, b = sa[k], sb[k]
  if kind == 'w' and now >= a then
    a, b = num(p1), 0
    if now >= a then a = num(p2) end
  end
  return a, b
end

-- holds reports whether concurrency key k holds lease, as the batch has left it.
local function holds(k, lease)
  local set = leases[k]
  if not set then
    set = {}
    leases[k] = set
  end
  local held = set[lease]
  if held == nil then return call('ZSCORE', KEYS[k], lease) ~= false end
  return held ~= false
end

-- change records key k's new state. A rolling window adds delta to slot a of its counts b. A
-- concurrency limit counts a lease once however often it is taken, and a release only of a lease
-- it holds.
local function change(k, kind, a, b, p1, p2, delta, now)
  if kind == 'm' then return end
  if kind == 'r' then
    if a < sa[k] then b.to, b.changed = nil, true end -- an older slot changed
    b[a] = max((b[a] or 0) + delta, 0)
    sa[k], written[k], shapes[k] = max(sa[k], a), now, p1
  elseif kind ~= 'c' then
    sa[k], sb[k], written[k] = a, b, now
  elseif delta > 0 then
    if not holds(k, p2) then sb[k] = sb[k] + 1 end
    leases[k][p2], ttls[k] = now + num(p1), num(p1)
  elseif delta < 0 then
    if holds(k, p2) then sb[k] = sb[k] - 1 end
    leases[k][p2] = false
  end
end

-- rollingReset returns how long until a rolling window counts nothing: until the newest of its
-- slots from oldest on that counts anything is past.
local function rollingReset(counts, newest, oldest, width, slots, now)
  olderCounts(counts)
  for j = newest, oldest, -1 do
    if (counts[j] or 0) > 0 then return (j + slots + 1) * width - now end
  end
  return 0
end

-- evaluateRolling is evaluate for a rolling window: a is its newest slot, b its counts; the state
-- it returns is the slot to take from, and the counts.
local function evaluateRolling(cap, p1, a, b, cost, now)
  local width, slots = shape(p1)
  local slot = max(a, floor(now / width))
  local oldest = slot - slots
  local used = 0
  if oldest <= a then used = (b[a] or 0) + olderSum(b, oldest, a, slots) end
  if used + cost > cap then
    olderCounts(b)
    -- The wait is until the oldest slots that hold the excess are past.
    local excess, wait = used + cost - cap, 0
    for j = oldest, a do
      excess = excess - (b[j] or 0)
      if excess <= 0 then
        wait = (j + slots + 1) * width - now
        break
      end
    end
    return false, false, wait, max(cap - used, 0), rollingReset(b, a, oldest, width, slots, now), a, b
  end
  local reset = (slot + slots + 1) * width - now
  if (b[slot] or 0) + cost <= 0 then reset = rollingReset(b, a, oldest, width, slots, now) end
  return true, false, 0, cap - used - cost, reset, slot, b
end

-- largest is the most one cost may be on a check: its capacity, or a bucket's p2 when set.
local function largest(kind, cap, p2)
  if kind == 'b' and p2 ~= '' then return num(p2) end
  return cap
end

-- evaluate returns ok, never, wait, remaining, reset and the new state (a, b).
local function evaluate(kind, cap, p1, p2, a, b, cost, now)
  if kind == 'm' then return a >= cost, false, 0, 0, 0, a, b end
  if cost > largest(kind, cap, p2) then
    return false, true, 0, 0, 0, a, b -- waiting will not help
  end
  if kind == 'r' then return evaluateRolling(cap, p1, a, b, cost, now) end
  if kind == 'b' then
    local interval = num(p1)
    local tolerance = cap * interval
    local tat = max(a, now)
    local own = tat -- what a request within the burst waits for: a pace's b (see core.go)
    if p2 ~= '' then own = max(b, now) end
    local earliest = own + cost * interval - tolerance
    if cost > cap then earliest = tat end -- past the burst: when the bucket is full
    if earliest > now then
      return false, false, earliest - now, floor(max(tolerance - (own - now), 0) / interval), tat - now, a, b
    end
    local nxt, left = tat + cost * interval, tat + cost * interval
    if p2 ~= '' then left = min(own + cost * interval, now + tolerance) end
    return true, false, 0, floor(max(tolerance - (left - now), 0) / interval), nxt - now, nxt, left
  end
  local reset = 0
  if kind == 'w' then reset = a - now end
  if b + cost > cap then
    local wait = 0
    if kind == 'w' then wait = reset end
    return false, false, wait, max(cap - b, 0), reset, a, b
  end
  return true, false, 0, cap - b - cost, reset, a, b + cost
end

-- settleRolling returns the slot of a rolling window (newest slot a, counts b) that a settlement
-- adds to, what it adds there (no slot going below zero, nor above four capacities) and whether
-- it applies: the slot its decision took from (p2 is when the decision was taken; '' settles in
-- the current slot), and nothing once that slot no longer counts.
local function settleRolling(cap, p1, p2, a, b, delta, now)
  local width, slots = shape(p1)
  local slot = max(a, floor(now / width))
  if p2 ~= '' then
    local took = min(floor(num(p2) / width), a)
    if took < slot - slots then return took, 0, false end
    slot = took
    if took < a then olderCounts(b) end -- the newest's count is read with the value
  end
  local before = b[slot] or 0
  return slot, min(max(before + delta, 0), 4 * cap) - before, true
end

-- settle adds each check's cost. With undo set, a window check's p1 is the end of the window its
-- decision took from, and a window that has moved on since is left as it is. A rolling check's
-- p2, in a settlement as in an undo, names when its decision was taken (see settleRolling).
local function settle(base, n, now, mark, keep, undo)
  if mark > 0 then
    if values[mark] or marks[mark] then return end -- applied before
    marks[mark] = keep
  end
  for j = base, base + 6 * (n - 1), 6 do
    local k, kind, cap, p1, p2 = num(ARGV[j]), ARGV[j + 1], num(ARGV[j + 2]), ARGV[j + 3], ARGV[j + 4]
    local most = 4 * largest(kind, cap, p2)
    local delta = min(max(num(ARGV[j + 5]), -most), most)
    local a, b = state(k, kind, p1, p2, now)
    local apply = true
    if kind == 'm' then
      apply = false
    elseif kind == 'b' then
      local step = delta * num(p1)
      if p2 ~= '' then b = min(max(max(b, now) + step, now), now + cap * num(p1)) end
      a = max(max(a, now) + step, now)
      if p2 == '' then b = a end
    elseif kind == 'w' then
      b = max(b + delta, 0)
      apply = not (undo and (a ~= num(p1) or now >= a))
    elseif kind == 'r' then
      a, delta, apply = settleRolling(cap, p1, p2, a, b, delta, now)
    end
    if apply then
      change(k, kind, a, b, p1, p2, delta, now)
    end
  end
end

-- renew pushes each held lease's expiry to now plus its time to live; a lease that expired or was
-- released stays gone. Every check is a concurrency check.
local function renew(base, n, now)
  for j = base, base + 6 * (n - 1), 6 do
    local k, p1, lease = num(ARGV[j]), ARGV[j + 3], ARGV[j + 4]
    state(k, 'c', p1, lease, now)
    if holds(k, lease) then
      leases[k][lease], ttls[k] = now + num(p1), num(p1)
    end
  end
end

local reply = {}
-- One decision's checks: whether each passed, and the state each would take.
local passed, nexta, nextb = {}, {}, {}

local function decide(base, n, now)
  local r = #reply
  local allowed, refused, wait, never = 1, -1, 0, 0
  for i = 1, n do
    local j = base + 6 * (i - 1)
    local k, kind, cap, p1, p2, cost = num(ARGV[j]), ARGV[j + 1], num(ARGV[j + 2]), ARGV[j + 3], ARGV[j + 4], num(ARGV[j + 5])
    local a, b = state(k, kind, p1, p2, now)
    local ok, nev, w, rem, reset
    ok, nev, w, rem, reset, nexta[i], nextb[i] = evaluate(kind, cap, p1, p2, a, b, cost, now)
    passed[i], reply[r + 4 + 2 * i], reply[r + 5 + 2 * i] = ok, rem, reset
    if not ok then
      if allowed == 1 then allowed, refused = 0, i - 1 end
      wait = max(wait, w)
      if nev then never = 1 end
    end
  end
  reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4], reply[r + 5] = allowed, refused, wait, never, now
  for i = 1, n do
    local j = base + 6 * (i - 1)
    if allowed == 1 then
      change(num(ARGV[j]), ARGV[j + 1], nexta[i], nextb[i], ARGV[j + 3], ARGV[j + 4], num(ARGV[j + 5]), now)
    elseif passed[i] then
      -- Nothing was taken: a check that passed reports what it has before this request.
      reply[r + 4 + 2 * i] = reply[r + 4 + 2 * i] + num(ARGV[j + 5])
    end
  end
end

local j = 1
while j <= #ARGV do
  local now, mode, n = clock(ARGV[j]), ARGV[j + 1], num(ARGV[j + 2])
  if mode == 'settle' or mode == 'undo' then
    settle(j + 5, n, now, num(ARGV[j + 3]), ARGV[j + 4], mode == 'undo')
  elseif mode == 'renew' then
    renew(j + 5, n, now)
  else
    decide(j + 5, n, now)
  end
  j = j + 5 + 6 * n
end

-- writeRolling stores rolling window k's value (see the top), down to its oldest slot that counts
-- anything (as read, when only the newest slot changed), to expire when its newest slot is past:
-- at most a period and a slot after its last change. A window that counts nothing is dropped.
local function writeRolling(k, now)
  local width, slots = shape(shapes[k])
  local newest, counts = sa[k], sb[k]
  local c, ttl = counts[newest] or 0, ms((newest + slots + 1) * width - now)
  if counts.top == newest and not counts.changed and floor(now / width) <= newest then
    -- Only the newest slot changed, and no older one has left: the older counts stand as read.
    if c == 0 and counts.stored == 0 then
      call('DEL', KEYS[k])
    else
      call('SET', KEYS[k], string.format('%.0f %.0f %.0f', newest, c, counts.stored) .. counts.tail, 'PX', ttl)
    end
    return
  end
  olderCounts(counts)
  local older, last, sum = {}, 0, 0
  for j = newest - 1, max(newest, floor(now / width)) - slots, -1 do
    local n = counts[j] or 0
    older[#older + 1] = n == 0 and '0' or string.format('%.0f', n)
    if n > 0 then last, sum = #older, sum + n end
  end
  if c == 0 and sum == 0 then
    call('DEL', KEYS[k])
  elseif last == 0 then
    call('SET', KEYS[k], string.format('%.0f %.0f 0', newest, c), 'PX', ttl)
  else
    call('SET', KEYS[k], string.format('%.0f %.0f %.0f ', newest, c, sum) .. table.concat(older, ' ', 1, last), 'PX', ttl)
  end
end

-- Each changed bucket and window is written once, to expire when it would be full or over; each
-- lease set's changes are made, and a set that took a lease lives as long as it.
for k, set in pairs(leases) do
  for lease, expiry in pairs(set) do
    if expiry then call('ZADD', KEYS[k], expiry, lease) else call('ZREM', KEYS[k], lease) end
  end
  if ttls[k] then call('PEXPIRE', KEYS[k], ms(ttls[k])) end
end
for k, now in pairs(written) do
  local a = sa[k]
  if kinds[k] == 'w' then
    call('SET', KEYS[k], string.format('%.0f %.0f', a, sb[k]), 'PX', ms(a - now))
  elseif kinds[k] == 'r' then
    writeRolling(k, now)
  elseif a > now and sb[k] < a then
    call('SET', KEYS[k], string.format('%.17g %.17g', a, sb[k]), 'PX', ms(a - now))
  elseif a > now then
    call('SET', KEYS[k], a, 'PX', ms(a - now))
  else
    call('DEL', KEYS[k])
  end
end
for k, keep in pairs(marks) do
  call('SET', KEYS[k], 1, 'PX', keep)
end
return reply
