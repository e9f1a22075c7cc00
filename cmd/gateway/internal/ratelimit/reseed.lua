-- Re-seeds a scope's calendar windows from the durable record (see record.go), unless the scope's
-- mark already holds the record's version or a later one: atomically, so that several gateways
-- that find the scope behind re-seed it once.
--
-- KEYS[1]: the scope's mark; KEYS[2..]: its windows, each in the scope's hash tag.
-- ARGV[1]: now in microseconds, or '' for Redis's own clock; ARGV[2]: the record's version; then,
-- for each window, the end of the window the record holds (microseconds) and what it used.
-- A window's value is "end used" (see decide.lua). A window of the record that has ended is
-- skipped; one whose store holds the same window takes the larger use; one whose store holds an
-- older window (or none) takes the record's; one whose store holds a later window is left.
-- Returns 1 when it re-seeded, 0 when the mark held the version already.

local mark = tonumber(redis.call('GET', KEYS[1]))
local version = tonumber(ARGV[2])
if mark and mark >= version then return 0 end

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

for i = 2, #KEYS do
  local ends, used = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  if ends > now then
    local stored, storedUsed = 0, 0
    local v = redis.call('GET', KEYS[i])
    if v then
      local sep = string.find(v, ' ', 1, true)
      if sep then
        stored, storedUsed = tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
      end
    end
    if stored == ends then used = math.max(used, storedUsed) end
    if stored <= ends then
      redis.call('SET', KEYS[i], string.format('%.0f %.0f', ends, used), 'PX', math.max(math.ceil((ends - now) / 1000), 1))
    end
  end
end
redis.call('SET', KEYS[1], string.format('%.0f', version))
return 1
