-- S2 fixed-window limiter. KEYS[1] = window counter key; ARGV[1] = limit, ARGV[2] = window ms.
-- Returns {allowed (1/0), count in window, ms until the window resets}.
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local ttl = redis.call('PTTL', KEYS[1])
if count <= tonumber(ARGV[1]) then
  return {1, count, ttl}
end
return {0, count, ttl}
