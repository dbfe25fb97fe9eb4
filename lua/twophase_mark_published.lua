-- S6 mark-published. KEYS[1] = {vehicle:N}:prepared; ARGV[1] = output id.
-- Returns {'published'} (also when already published), {'missing'} without a prepared
-- record, {'busy', other output id} when another output holds it.
local owner = redis.call('HGET', KEYS[1], '_output')
if not owner then
  return { 'missing' }
end
if owner ~= ARGV[1] then
  return { 'busy', owner }
end
redis.call('HSET', KEYS[1], '_phase', 'published')
return { 'published' }
