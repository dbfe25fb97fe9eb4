-- S3 lock renew: only the current holder with the current token may extend.
-- KEYS[1] = lock key; ARGV[1] = owner id, ARGV[2] = token, ARGV[3] = ttl ms. Returns 1 or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] .. ':' .. ARGV[2] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 0
