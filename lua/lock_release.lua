-- S3 lock release: only the current holder with the current token may release.
-- KEYS[1] = lock key; ARGV[1] = owner id, ARGV[2] = token. Returns 1 or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] .. ':' .. ARGV[2] then
  return redis.call('DEL', KEYS[1])
end
return 0
