-- CLUSTER COUNTKEYSINSLOT / GETKEYSINSLOT for the proxy, run on each node (plain Redis
-- primaries keep no slot index): SCAN the node's db, hash each key with Redis Cluster's
-- CRC16 of its {hash tag}, keep those in slot ARGV[1]. ARGV[2] < 0 counts them; otherwise
-- it returns up to ARGV[2] of them. One pass over the node's keys: O(N), the node blocked
-- meanwhile, as KEYS would.
local band, bxor, lshift, rshift = bit.band, bit.bxor, bit.lshift, bit.rshift
local T = {}
for i = 0, 255 do
  local c = lshift(i, 8)
  for _ = 1, 8 do
    if band(c, 0x8000) ~= 0 then
      c = bxor(lshift(c, 1), 0x1021)
    else
      c = lshift(c, 1)
    end
    c = band(c, 0xffff)
  end
  T[i] = c
end

local function slot_of(k)
  local open = string.find(k, '{', 1, true)
  if open then
    local close = string.find(k, '}', open + 1, true)
    if close and close > open + 1 then
      k = string.sub(k, open + 1, close - 1)
    end
  end
  local crc = 0
  for i = 1, #k do
    crc = band(bxor(lshift(crc, 8), T[bxor(rshift(crc, 8), string.byte(k, i))]), 0xffff)
  end
  return band(crc, 16383)
end

local want, max = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, seen, n, cursor = {}, {}, 0, '0'
repeat
  local r = redis.call('SCAN', cursor, 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    -- SCAN may return a key twice; count it once.
    if not seen[k] and slot_of(k) == want then
      seen[k] = true
      n = n + 1
      if max >= 0 then
        if n > max then
          return out
        end
        out[n] = k
      end
    end
  end
until cursor == '0'
if max < 0 then
  return n
end
return out
