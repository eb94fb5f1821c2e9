--[[
  The pre-queue and its lottery. Fans who join before onSaleAt enter KEYS[3] (pre) under a member
  that sorts them by sha1hex(seed .. ':' .. fanId), so the set IS the lottery order and the draw
  only freezes it. Once drawn, the pre-queue holds places 1..preCount in lottery order
  (place = ZRANK + 1); later arrivals take preCount+1, preCount+2, ... (fifo).

  Defines  pre_member(r, fanId)      the fan's member in the pre-queue
           place_of(r, fanId, f)     the fan's place (0 before the draw: only the rank exists)
           open_if_due(r, now)       the draw, once Redis time reaches onSaleAt
  Needs    room
  Keys     K_PRE
]]
--- @include "room"

local function pre_member(r, fanId)
  return redis.sha1hex(r.seed .. ':' .. fanId) .. fanId
end

local function place_of(r, fanId, f)
  if f.pos > 0 then return f.pos end
  if r.openedAt == 0 then return 0 end
  return redis.call('ZRANK', K_PRE, pre_member(r, fanId)) + 1
end

-- The draw: the pre-queue is already in lottery order (ZSET by hash), so drawing is O(1):
-- freeze it and start numbering later arrivals after it.
local function open_if_due(r, now)
  if r.openedAt > 0 or now < r.onSaleAt then return end
  r.openedAt = r.onSaleAt
  r.preCount = redis.call('ZCARD', K_PRE)
  r.tail = r.preCount
  r.served = 0
  r.credit = 0
  r.accruedAt = r.openedAt
  r.winStart = r.openedAt
  r.winCount = 0
end
