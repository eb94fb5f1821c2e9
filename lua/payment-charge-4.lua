--[[
  Simulated payment provider: charges once per idempotency key. The first call with a key
  decides (charge or decline) and records the decision; every later call with the key, concurrent
  or after a restart, replays it and charges nothing more. Redis runs the script atomically, so
  fifty callers racing on one key see one decision.

  KEYS[1]  pay:{ns}:idem:<idempotencyKey>  hash: outcome (charged | declined), chargeId, amount,
                                           fp (token fingerprint), reason, at (ms)
  KEYS[2]  pay:{ns}:charge:<chargeId>      the charge this call would create (ARGV[1]'s): key,
                                           amount, at; refund-2 later adds refundId, refundedAt, refundKey
  KEYS[3]  pay:{ns}:charges                list of charge ids in creation order
  KEYS[4]  pay:{ns}:totals                 hash: captured, refunded, charges, refunds, declines, errors

  ARGV[1]  proposed charge id, used only when this call creates the charge
  ARGV[2]  amount, whole minor units > 0
  ARGV[3]  fingerprint of the payment token (the token itself is not stored)
  ARGV[4]  what the token asks for: charge | decline | error
  ARGV[5]  the decline reason (ARGV[4] = decline), else ''
  ARGV[6]  the idempotency key itself, kept on the charge for audits

  Returns  { code, value, amount, created }, codes from the payment family's one table
           (src/payments/codes.ts; unique across this script and payment-refund-2):
            1  charged        value = charge id
            2  declined       value = reason
           -1  provider error: nothing recorded or charged; the same key may be retried
           -2  idempotency mismatch: the key was first used with another amount or token;
               value = 'amount' | 'token', amount = the first call's amount
           -3  the proposed charge id exists already (never overwritten); nothing charged
           created is 1 when this call made the decision, 0 on a replay or an error.

  Time comes from Redis (includes/now-ms.lua) so every instance shares one clock.
]]
--- @include "now-ms"

local amount = tonumber(ARGV[2])
if not amount or amount <= 0 or amount ~= math.floor(amount) then
  return redis.error_reply('ERR amount must be a positive integer')
end

local prior = redis.call('HMGET', KEYS[1], 'outcome', 'chargeId', 'amount', 'fp', 'reason')
if prior[1] then
  local priorAmount = tonumber(prior[3])
  if priorAmount ~= amount then return { -2, 'amount', priorAmount, 0 } end
  if prior[4] ~= ARGV[3] then return { -2, 'token', priorAmount, 0 } end
  if prior[1] == 'charged' then return { 1, prior[2], priorAmount, 0 } end
  return { 2, prior[5] or '', priorAmount, 0 }
end

if ARGV[4] == 'error' then
  -- A provider error decides nothing: it is not recorded under the key, so a retry may charge.
  redis.call('HINCRBY', KEYS[4], 'errors', 1)
  return { -1, '', amount, 0 }
end

local at = now_ms()

if ARGV[4] == 'decline' then
  redis.call('HSET', KEYS[1], 'outcome', 'declined', 'amount', ARGV[2], 'fp', ARGV[3], 'reason', ARGV[5], 'at', at)
  redis.call('HINCRBY', KEYS[4], 'declines', 1)
  return { 2, ARGV[5], amount, 1 }
end

if ARGV[4] ~= 'charge' then
  return redis.error_reply('ERR unknown disposition ' .. ARGV[4])
end
if redis.call('EXISTS', KEYS[2]) == 1 then return { -3, '', amount, 0 } end

redis.call('HSET', KEYS[2], 'key', ARGV[6], 'amount', ARGV[2], 'at', at)
redis.call('HSET', KEYS[1], 'outcome', 'charged', 'chargeId', ARGV[1], 'amount', ARGV[2], 'fp', ARGV[3], 'at', at)
redis.call('RPUSH', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[4], 'captured', ARGV[2])
redis.call('HINCRBY', KEYS[4], 'charges', 1)
return { 1, ARGV[1], amount, 1 }
