-- S3 lock acquire with fencing. KEYS[1] = lock key, KEYS[2] = fencing counter key
-- (same hash tag); ARGV[1] = owner id, ARGV[2] = ttl ms.
-- Returns the new fencing token (strictly increasing), or false when held by another owner.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
return token
