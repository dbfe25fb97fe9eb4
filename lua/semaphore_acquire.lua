-- S4 semaphore acquire. KEYS[1] = gate (sorted set of holder tokens scored by lease
-- expiry, ms); ARGV[1] = holder token, ARGV[2] = limit, ARGV[3] = lease ms.
-- Returns {1, in-flight count} when admitted (a token already holding is re-leased),
-- {0, in-flight count} when the gate is full. Expired holders are dropped first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
local count = redis.call('ZCARD', KEYS[1])
if not held and count >= tonumber(ARGV[2]) then
  return { 0, count }
end
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
-- The gate outlives its last lease by nothing: abandoned gates do not accumulate.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return { 1, redis.call('ZCARD', KEYS[1]) }
