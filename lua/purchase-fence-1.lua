--[[
  The purchase fence of one hold (src/purchases/fence.ts): while one purchase of a hold is under
  way, another (a second Idempotency-Key: a double click, a client that makes a key per click) is
  turned away before it charges anything. A filter, never the decision: DynamoDB's confirmation
  still lets one purchase of a hold through, and a charge that cannot be confirmed is refunded.

  KEYS[1]  buy:{evt:E}:<holdId>:<fan hash>   "<purchaseId>|<claimed at, ms>"
  ARGV[1]  'claim' | 'release'
  ARGV[2]  purchaseId
  ARGV[3]  claim: how long the fence lasts (ms)
  ARGV[4]  claim: the purchase id it may take the fence from ('' none: only a free fence)

  claim    { 1 } the fence is this purchase's (new, its own again, or taken over);
           { 0, holder, ageMs } another purchase holds it, claimed ageMs ago
  release  1 released, 0 the fence was not this purchase's
]]
--- @include "now-ms"

local held = redis.call('GET', KEYS[1])
local holder, at = nil, 0
if held then
  local h, t = string.match(held, '^([^|]*)|(%d+)$')
  holder, at = h, tonumber(t) or 0
end

if ARGV[1] == 'release' then
  if holder == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end

local now = now_ms()
if holder and holder ~= ARGV[2] and holder ~= ARGV[4] then
  return { 0, holder, math.max(0, now - at) }
end
redis.call('SET', KEYS[1], ARGV[2] .. '|' .. string.format('%d', now), 'PX', tonumber(ARGV[3]))
return { 1 }
