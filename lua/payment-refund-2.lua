--[[
  Simulated payment provider: refunds a whole charge, once. A repeated refund of the same charge
  (a retried compensation, a second key) returns the first refund id and moves no more money.

  KEYS[1]  pay:{ns}:charge:<chargeId>  hash written by payment-charge-4.lua: key, amount, at,
                                       and after a refund: refundId, refundedAt (ms), refundKey
  KEYS[2]  pay:{ns}:totals             hash: captured, refunded, charges, refunds, declines, errors

  ARGV[1]  proposed refund id, used only when this call refunds
  ARGV[2]  the caller's refund idempotency key, '' when none (kept for audits)

  Returns  { code, refundId, amount, created, idempotencyKey }, codes from the payment family's
           one table (src/payments/codes.ts; unique across payment-charge-4 and this script):
            3  refunded  refundId = this call's or the first one's; amount = the charge's;
                         created = 1 when this call refunded, 0 on a repeat;
                         idempotencyKey = the key the charge was made under
           -4  no such charge; nothing refunded

  Time comes from Redis (includes/now-ms.lua) so every instance shares one clock.
]]
--- @include "now-ms"

local charge = redis.call('HMGET', KEYS[1], 'amount', 'key', 'refundId')
if not charge[1] then return { -4 } end
local amount = tonumber(charge[1])
if charge[3] then return { 3, charge[3], amount, 0, charge[2] } end

local at = now_ms()
redis.call('HSET', KEYS[1], 'refundId', ARGV[1], 'refundedAt', at, 'refundKey', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'refunded', charge[1])
redis.call('HINCRBY', KEYS[2], 'refunds', 1)
return { 3, ARGV[1], amount, 1, charge[2] }
