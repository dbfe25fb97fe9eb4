-- S6 promote. KEYS[1] = {vehicle:N}:prepared, KEYS[2] = {vehicle:N}:committed-revision,
-- KEYS[3] = {vehicle:N}:checkpoint; ARGV[1] = output id, ARGV[2] = checkpoint TTL ms.
-- Returns {'promoted', revision} after replacing the checkpoint with the prepared one
-- (TTL set), recording the committed revision and deleting the prepared record;
-- {'not-published'} before mark-published; {'missing'}; {'busy', other output id}.
local record = redis.call('HGETALL', KEYS[1])
if #record == 0 then
  return { 'missing' }
end
local meta, checkpoint = {}, {}
for i = 1, #record, 2 do
  local field, value = record[i], record[i + 1]
  if string.sub(field, 1, 2) == 'c:' then
    checkpoint[#checkpoint + 1] = string.sub(field, 3)
    checkpoint[#checkpoint + 1] = value
  else
    meta[field] = value
  end
end
if meta._output ~= ARGV[1] then
  return { 'busy', meta._output }
end
if meta._phase ~= 'published' then
  return { 'not-published' }
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], unpack(checkpoint))
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('SET', KEYS[2], meta._revision)
redis.call('DEL', KEYS[1])
return { 'promoted', meta._revision }
