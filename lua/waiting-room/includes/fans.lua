--[[
  A fan's place record in KEYS[2] (fans), "s|pos|n|sid|exp|at":
    s    p prequeue (place still given by the lottery rank), w waiting, a admitted,
         x abandoned, c completed, e expired, r revoked
    pos  place (0 while it is the lottery rank not yet looked up); n: pre-queue arrival number
    sid/exp/at  session id, its expiry and the admission time (ms), once admitted
  A place is kept by polling (KEYS[5] seen, or the fan shards' beats: room.lua sharded); one not
  polled for abandonSeconds is lost. The clock
  starts at the draw at the earliest (drawnAt): pre-queued fans are told to come back at the
  on-sale, and the draw may wait minutes for its beacon after the close.

  Defines  STATE_NAMES                  record letter -> the status a fan is shown
           get_fan(fanId) -> f | nil    put_fan(fanId, f)    pack_fan(f) (the record's text)
           unpack_fan(raw) -> f         a record read some other way (an HMGET of many)
           new_fan_text(s, placeText)   pack_fan of a fan just placed, its place given as text
           is_stale(r, seenAt, now)     the place was not polled for abandonSeconds (never
                                        while the draw is pending)
           abandon(r, fanId, f)         gives the place up (the cursor will pass it; a place it
                                        passed gives its offer back: room.lua claims)
           settle_fan(r, fanId, f, now) brings the fan's own record up to date before it is shown
  Needs    room, prequeue
  Keys     K_FANS, K_SEEN, K_GONE, K_FIFO; K_ACTIVE (settle_fan ends an expired session; abandon
           gives an offer back)
]]
--- @include "room"
--- @include "prequeue"

local STATE_NAMES = { p = 'prequeue', w = 'waiting', a = 'admitted', x = 'abandoned',
  c = 'completed', e = 'expired', r = 'revoked' }

local function unpack_fan(raw)
  local s, pos, n, sid, exp, at = string.match(raw, '^(%a)|(%d+)|(%d+)|([^|]*)|(%d+)|(%d+)$')
  return { s = s, pos = tonumber(pos), n = tonumber(n), sid = sid, exp = tonumber(exp),
    at = tonumber(at) }
end

local function get_fan(fanId)
  local raw = redis.call('HGET', K_FANS, fanId)
  if not raw then return nil end
  return unpack_fan(raw)
end

local function pack_fan(f)
  return f.s .. '|' .. int(f.pos) .. '|' .. int(f.n) .. '|' .. f.sid .. '|' .. int(f.exp) .. '|' .. int(f.at)
end

-- pack_fan of a fan just placed (every field but one 0 or empty), from its place already as text:
-- 'w' waiting at `placeText`, or 'p' pre-queued with arrival number `placeText`. A batch of joins
-- writes many, and string.format is most of a join's Lua time (join-batch-n.lua).
local function new_fan_text(s, placeText)
  if s == 'p' then return 'p|0|' .. placeText .. '||0|0' end
  return 'w|' .. placeText .. '|0||0|0'
end

local function put_fan(fanId, f)
  redis.call('HSET', K_FANS, fanId, pack_fan(f))
end

-- A place is kept by polling: the last join/poll, or the draw, whichever is later. Before the
-- draw nobody's place can be lost: pre-queued fans are told to come back at the on-sale, and nobody
-- is admitted while the draw (which may wait minutes for its beacon) is pending.
local function is_stale(r, seenAt, now)
  if r.openedAt > 0 and r.drawn == 0 then return false end
  return math.max(seenAt, r.openedAt, r.drawnAt) < now - r.abandonSeconds * 1000
end

local function abandon(r, fanId, f)
  redis.call('ZREM', K_SEEN, fanId)
  if f and (f.s == 'p' or f.s == 'w') then
    local pos = place_of(r, fanId, f)
    f.s = 'x'
    f.pos = pos
    put_fan(fanId, f)
    if pos > r.served then
      redis.call('ZADD', K_GONE, int(pos), int(pos))
    elseif claims(r) and pos > 0 and redis.call('ZREM', K_ACTIVE, OFFER .. int(pos)) == 1 then
      -- passed and offered, not claimed: the offer's slot is free at once
      r.offered = r.offered - 1
    end
    if pos > r.preCount and not claims(r) then redis.call('ZREM', K_FIFO, fanId) end
    r.abandoned = r.abandoned + 1
  end
end

-- A fan's own record, brought up to date before it is shown: a session past its expiry has
-- ended; a place not polled for abandonSeconds is lost; a lottery place is looked up once.
local function settle_fan(r, fanId, f, now)
  if f.s == 'a' and f.exp <= now then
    if redis.call('ZREM', K_ACTIVE, f.sid) == 1 then r.expired = r.expired + 1 end
    f.s = 'e'
    put_fan(fanId, f)
  elseif (f.s == 'p' or f.s == 'w') and r.openedAt > 0 then
    -- a sharded room's beats are on other slots: the sweep (fan-sweep.ts) gives lost places up,
    -- and a poll that finds its own beat lapsed tells status-10.lua
    local stale = false
    if not sharded(r) then stale = is_stale(r, tonumber(redis.call('ZSCORE', K_SEEN, fanId)) or 0, now) end
    if stale then
      abandon(r, fanId, f)
    elseif f.s == 'p' and r.drawn ~= 0 then
      f.pos = place_of(r, fanId, f)
      f.s = 'w'
      put_fan(fanId, f)
    end
  end
end
