-- S4 semaphore release. KEYS[1] = gate; ARGV[1] = holder token.
-- Returns 1 when the token held a lease, 0 otherwise.
return redis.call('ZREM', KEYS[1], ARGV[1])
