--[[
  What the scripts answer: a fan's view of their place, and the room's snapshot, as flat
  key/value lists (src/waiting-room/ reads them by name).

  Defines  fan_view(r, fanId, f, now, memo)  status, position, ahead, session, rate, ... of one
                               fan; `memo` (optional, join-batch-n.lua) carries what is the same
                               for every fan of a batch of new places, read once: live (sessions),
                               preCard (ZCARD pre), goneAhead (vacated places past the cursor,
                               all of them ahead of a new place at the back)
           snapshot(r, now)            the room's settings, state, counters and lottery
  Needs    room, prequeue, fans, sessions
  Keys     K_PRE, K_GONE (and those of the includes it needs)
]]
--- @include "room"
--- @include "prequeue"
--- @include "fans"
--- @include "sessions"

-- Admissions per second a waiting fan can expect: the operator's rate while there is room;
-- while the room is full, the rate sessions actually ended at over the last window.
local function effective_rate(r, live)
  if room_state(r) ~= 'open' then return 0 end
  if live >= r.maxActive then
    if r.lastRate > 0 then return math.min(r.admitPerSecond, r.lastRate) end
    if r.maxActive <= 0 then return 0 end
    return math.min(r.admitPerSecond, r.maxActive / r.sessionSeconds)
  end
  return r.admitPerSecond
end

-- The pre-queue's size: its members here, or, a room whose records live on the fan shards, the
-- arrival numbers given (room.lua shard_records: the members are on the shards).
local function pre_card(r)
  if shard_records(r) then return r.preSeq end
  return redis.call('ZCARD', K_PRE)
end

local function waiting_count(r)
  if r.openedAt == 0 then return pre_card(r) end
  return r.tail - r.served - redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '+inf')
end

local function fan_view(r, fanId, f, now, memo)
  memo = memo or {}
  local status = STATE_NAMES[f.s]
  local position, ahead, provisional = f.pos, 0, 0
  if f.s == 'p' and (r.openedAt == 0 or r.drawn == 0) then
    -- before the draw only the arrival number is known; everyone else in the pre-queue may
    -- end up ahead
    position = f.n
    provisional = 1
    ahead = (memo.preCard or pre_card(r)) - 1
  elseif f.s == 'p' or f.s == 'w' then
    status = 'waiting'
    position = place_of(r, fanId, f)
    ahead = position - r.served - 1
      - (memo.goneAhead or redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '(' .. int(position)))
    if ahead < 0 then ahead = 0 end
  end
  local live = memo.live or live_sessions(now)
  -- The integers leave as numbers: Redis makes each an integer reply (a number with a fraction
  -- would be truncated, as int() does), which costs no string.format; the callers read every
  -- field as text either way (src/waiting-room/replies.ts Fields).
  return { 'status', status, 'position', position, 'provisional', provisional,
    'ahead', ahead, 'sessionId', f.sid, 'admittedAt', f.at, 'expiresAt', f.exp,
    'now', now, 'onSaleAt', r.onSaleAt, 'roomState', room_state(r),
    'rate', dec(effective_rate(r, live)), 'full', live >= r.maxActive and 1 or 0,
    'admitPerSecond', r.rateText,
    'abandonSeconds', r.abandonSeconds, 'epoch', r.epoch, 'drawn', r.drawn }
end

local function snapshot(r, now)
  local live = live_sessions(now)
  local seed = ''
  if r.openedAt > 0 and r.drawn ~= 0 then seed = r.seed end
  return { 'now', int(now), 'state', room_state(r), 'onSaleAt', int(r.onSaleAt),
    'openedAt', int(r.openedAt), 'admitPerSecond', r.rateText,
    'maxActive', int(r.maxActive), 'sessionSeconds', int(r.sessionSeconds),
    'abandonSeconds', int(r.abandonSeconds), 'paused', int(r.paused), 'closed', int(r.closed),
    'commitment', r.commitment, 'seed', seed, 'waiting', int(waiting_count(r)),
    'active', int(math.max(0, live - r.offered)), 'rate', dec(effective_rate(r, live)), 'joined', int(r.joined),
    'admitted', int(r.admitted), 'abandoned', int(r.abandoned), 'completed', int(r.completed),
    'expired', int(r.expired), 'revoked', int(r.revoked), 'preCount', int(r.preCount),
    'tail', int(r.tail), 'served', int(r.served), 'epoch', r.epoch, 'drawn', int(r.drawn),
    'membershipHash', r.membershipHash, 'beacon', r.beacon,
    'powBits', int(r.powBits), 'invites', int(r.invites),
    -- the closed loop's settings as stored ('' when never set: src/waiting-room/replies.ts has the defaults)
    'autoAdmit', room_raw(r).autoAdmit or '', 'autoMin', room_raw(r).autoMin or '', 'autoMax', room_raw(r).autoMax or '',
    'autoP99Ms', room_raw(r).autoP99Ms or '', 'autoThrottles', room_raw(r).autoThrottles or '',
    -- the settings' version (update-settings-9.lua); '' before the first change
    'settingsAt', room_raw(r).settingsAt or '',
    -- the fan shards the heartbeats live in (0: `seen`), fixed when the room was created
    'fanShards', int(r.fanShards),
    -- a room with claims (room.lua): the sessions offered at places passed, not yet claimed
    -- (counted against maxActive with `active`)
    'claims', int(r.claims), 'offered', int(r.offered) }
end
