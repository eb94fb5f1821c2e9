--[[
  The pre-queue and its draw (issue 18 item 2). Fans who join before onSaleAt enter KEYS[3] (pre)
  as plain fan ids (score 0): no rank exists while the pre-queue is open, so nothing in Redis
  tells anyone who will come first. At onSaleAt the pre-queue CLOSES (open_if_due: its size is
  frozen, later arrivals take places preCount+1, ... fifo); the draw itself runs in Node, in
  batches (src/waiting-room/draw.ts): it reads the frozen membership, computes the order from the
  committed seed, the membership hash and the beacon (src/lottery/draw.ts), writes each fan's
  place as its score, and flips `drawn` (lottery-drawn-8.lua). Until then no pre-queued fan is
  admitted and every place is unknown.

  Defines  pre_member(r, fanId)      the fan's member in the pre-queue (the fan id)
           place_of(r, fanId, f)     the fan's place (0 until drawn: no rank exists)
           open_if_due(r, now)       the close, once Redis time reaches onSaleAt
  Needs    room
  Keys     K_PRE
]]
--- @include "room"

local function pre_member(r, fanId)
  return fanId
end

local function place_of(r, fanId, f)
  if f.pos > 0 then return f.pos end
  if r.openedAt == 0 or r.drawn == 0 then return 0 end
  return tonumber(redis.call('ZSCORE', K_PRE, fanId)) or 0
end

-- The close: the pre-queue's membership is frozen and later arrivals are numbered after it;
-- the order waits for the draw (drawn = 0 until lottery-drawn-8.lua flips it).
local function open_if_due(r, now)
  if r.openedAt > 0 or now < r.onSaleAt then return end
  r.openedAt = r.onSaleAt
  -- records on the shards: every arrival number given is counted (one never written, a gateway
  -- lost mid-join, is a place nobody holds, vacated at the draw)
  if shard_records(r) then r.preCount = r.preSeq else r.preCount = redis.call('ZCARD', K_PRE) end
  r.tail = r.preCount
  r.served = 0
  r.credit = 0
  r.accruedAt = r.openedAt
  r.winStart = r.openedAt
  r.winCount = 0
  -- an empty pre-queue has nothing to draw
  if r.preCount == 0 then r.drawn = 1 else r.drawn = 0 end
end
