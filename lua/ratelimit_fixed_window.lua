-- S2 fixed-window limiter over two scopes. KEYS[1] = the user's counter for the current
-- window, KEYS[2] = the API key's counter for the same window (callers put the window
-- number in both names and give them the user's hash tag); ARGV[1] = user limit,
-- ARGV[2] = API-key limit, ARGV[3] = window length in ms.
-- Returns {1, user count, api-key count} when admitted (both counters incremented), or
-- {0, scope, ms until that scope's window resets} when a limit is reached, with neither
-- counter touched. scope is 'user' or 'apikey'.
local function count(key)
  return tonumber(redis.call('GET', KEYS[key]) or '0') or 0
end
local limits = { tonumber(ARGV[1]), tonumber(ARGV[2]) }
local scopes = { 'user', 'apikey' }
for i = 1, 2 do
  if count(i) >= limits[i] then
    return { 0, scopes[i], redis.call('PTTL', KEYS[i]) }
  end
end
local counts = {}
for i = 1, 2 do
  counts[i] = redis.call('INCR', KEYS[i])
  if counts[i] == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
  end
end
return { 1, counts[1], counts[2] }
