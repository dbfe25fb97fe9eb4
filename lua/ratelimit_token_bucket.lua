-- S2 token bucket. KEYS[1] = bucket hash {tokens, ts}; ARGV[1] = capacity,
-- ARGV[2] = tokens added per interval (0: never refills), ARGV[3] = interval ms,
-- ARGV[4] = cost of this request.
-- Returns {1, tokens left, 0} when admitted, else {0, tokens left, retry-after ms}
-- (-1 when the bucket can never hold enough).
-- Time comes from the server (TIME), so a test server's manual clock drives refills.
-- Refill advances by whole intervals only: `ts` moves by whole intervals too, so partial
-- progress toward the next token is never lost or granted early.
-- A malformed bucket (non-numeric state, or a key of another type) denies — fails
-- closed — and is given one interval to live, after which it starts over full.
local capacity = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local state = redis.pcall('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts
if state.err then
  tokens = nil
elseif not state[1] and not state[2] then
  tokens, ts = capacity, now
else
  tokens, ts = tonumber(state[1]), tonumber(state[2])
end
if not tokens or not ts or tokens < 0 then
  if redis.call('PTTL', KEYS[1]) < 0 then
    redis.call('PEXPIRE', KEYS[1], interval)
  end
  return { 0, 0, redis.call('PTTL', KEYS[1]) }
end
-- A lowered capacity caps the stored count; a clock set back restarts the interval.
tokens = math.min(tokens, capacity)
ts = math.min(ts, now)

if refill > 0 then
  local steps = math.floor((now - ts) / interval)
  if steps > 0 then
    tokens = math.min(capacity, tokens + steps * refill)
    ts = ts + steps * interval
  end
  if tokens == capacity then
    ts = now
  end
end

local admitted = tokens >= cost
if admitted then
  tokens = tokens - cost
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', ts)
if refill > 0 then
  -- Gone once it would be full again: a missing bucket is a full one.
  local intervals = math.ceil((capacity - tokens) / refill)
  redis.call('PEXPIRE', KEYS[1], math.max(1, ts + intervals * interval - now))
end
if admitted then
  return { 1, tokens, 0 }
end
if refill <= 0 or cost > capacity then
  return { 0, tokens, -1 }
end
local needed = math.ceil((cost - tokens) / refill)
return { 0, tokens, ts + needed * interval - now }
