-- Reads a scope's calendar windows for the durable record (see record.go), and moves the scope's
-- mark on by one when it holds at least the version the record holds: the store then holds all
-- the record does, and what it holds is the record's next version.
--
-- KEYS[1]: the scope's mark; KEYS[2..]: its windows, each in the scope's hash tag.
-- ARGV[1]: now in microseconds, or '' for Redis's own clock; ARGV[2]: the record's version.
-- Returns the mark's version after the snapshot (-1 for none), 1 when it was current (else 0),
-- now, then each window's value ("end used", see decide.lua) or ''.

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local mark = tonumber(redis.call('GET', KEYS[1]))
local current = 0
if mark and mark >= tonumber(ARGV[2]) then
  mark, current = mark + 1, 1
  redis.call('SET', KEYS[1], string.format('%.0f', mark))
end

local reply = {mark or -1, current, now}
for i = 2, #KEYS do
  reply[i + 2] = redis.call('GET', KEYS[i]) or ''
end
return reply
