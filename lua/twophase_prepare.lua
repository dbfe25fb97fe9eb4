-- S6 prepare. KEYS[1] = {vehicle:N}:prepared (hash), KEYS[2] = {vehicle:N}:committed-revision
-- (string). ARGV[1] = output id, ARGV[2] = expected base revision ('' = never committed),
-- ARGV[3] = the revision being prepared, ARGV[4..] = checkpoint field/value pairs.
-- Returns {'prepared', revision} | {'already', revision} (same output id prepared it)
-- | {'busy', other output id} | {'conflict', committed revision ('' if none)}.
-- The record keeps its metadata in '_'-prefixed fields and the checkpoint under 'c:' so
-- any field name (binary included) round-trips.
local prepared = redis.call('HMGET', KEYS[1], '_output', '_revision')
if prepared[1] then
  if prepared[1] == ARGV[1] then
    return { 'already', prepared[2] }
  end
  return { 'busy', prepared[1] }
end
local committed = redis.call('GET', KEYS[2]) or ''
if committed ~= ARGV[2] then
  return { 'conflict', committed }
end
if #ARGV < 4 or #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR checkpoint needs field/value pairs')
end
local record = { '_output', ARGV[1], '_base', ARGV[2], '_revision', ARGV[3], '_phase', 'prepared' }
for i = 4, #ARGV, 2 do
  record[#record + 1] = 'c:' .. ARGV[i]
  record[#record + 1] = ARGV[i + 1]
end
redis.call('HSET', KEYS[1], unpack(record))
return { 'prepared', ARGV[3] }
