--[[
  Join an event's line, or return the place the fan already holds (idempotent per fan).

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  KEYS[9]     the client IP's bucket for joins of this event (see includes/token-bucket.lua;
              under the event's tag, built by src/waiting-room/keys.ts limitKey; untouched when
              its rate is 0)
  ARGV[1]     fanId
  ARGV[2]     per-IP rate (tokens/s; 0: no per-IP limit)
  ARGV[3]     per-IP burst
  ARGV[4]     bits of the proof of work the gateway checked for this join (0: none; optional)
  ARGV[5]     '1' when the gateway checked an operator's invite for this join (optional)
  ARGV[6]     a room with fan shards: how long ago (ms) the fan's beat before this join was, as its
              shard answered the join's beat (join-batch-n.lua passes it on); '' none. A place that
              lapsed meanwhile is given up first, as settle_fan gives it up from `seen`.

  The limit is taken first, in this same call, so a join is one Redis round trip; a refused join
  touches nothing of the line.

  Before the draw (Redis time < onSaleAt) a new fan enters the pre-queue and gets a provisional
  arrival number; afterwards the next place at the back. A fan whose place was abandoned, or
  whose session completed or expired, gets a new place at the back.

  Returns the fan view (flat key/value list, see fan_view in includes/views.lua) plus
  'created' 1|0 and 'invites' 1|0 (the room asks new places for an invite), or
    { 'limited', 'ip', 'retryAfterMs', ms }  the per-IP limit refused the join
    { 'refused', 'pow', 'powBits', n }       a new place needs a proof of n bits (room setting)
    { 'refused', 'invite' }                  a new place needs an invite (room setting)
    -1  unknown event (the room was never configured)
    -3  the room is closed: no new places
    -4  the fan's session was revoked: no new place
]]
--- @include "admission"
--- @include "views"
--- @include "token-bucket"

local fanId = ARGV[1]
local now = now_ms()
local ipRate = tonumber(ARGV[2])
if ipRate > 0 then
  local allowed, retry = take_token(KEYS[9], ipRate, tonumber(ARGV[3]), 1, now)
  if allowed == 0 then return { 'limited', 'ip', 'retryAfterMs', int(retry) } end
end

local r = load_room()
if not r then return -1 end
tick(r, now)

local f = get_fan(fanId)
if f and sharded(r) and (f.s == 'p' or f.s == 'w') and r.openedAt > 0 and (ARGV[6] or '') ~= '' then
  if is_stale(r, now - (tonumber(ARGV[6]) or 0), now) then abandon(r, fanId, f) end
end
if f then
  settle_fan(r, fanId, f, now)
  claim_passed(r, fanId, f, now)
end
if f and f.s == 'r' then
  save_room(r)
  return -4
end

local created = 0
if f and (f.s == 'p' or f.s == 'w' or f.s == 'a') then
  -- a sharded room's beat was written before this call (src/waiting-room/line.ts joinOnce)
  if f.s ~= 'a' and not sharded(r) then redis.call('ZADD', K_SEEN, int(now), fanId) end
else
  if r.closed ~= 0 then
    save_room(r)
    return -3
  end
  -- the room's own settings decide, in this call, so a raised cost applies at once
  if r.powBits > (tonumber(ARGV[4]) or 0) then
    save_room(r)
    return { 'refused', 'pow', 'powBits', int(r.powBits) }
  end
  if r.invites ~= 0 and ARGV[5] ~= '1' then
    save_room(r)
    return { 'refused', 'invite' }
  end
  f = { s = 'w', pos = 0, n = 0, sid = '', exp = 0, at = 0 }
  if r.openedAt == 0 then
    r.preSeq = r.preSeq + 1
    f.s = 'p'
    f.n = r.preSeq
    redis.call('ZADD', K_PRE, 0, pre_member(r, fanId))
  else
    r.tail = r.tail + 1
    f.pos = r.tail
    -- a room with claims keeps no `fifo`: its tick counts places (admission.lua)
    if not claims(r) then redis.call('ZADD', K_FIFO, int(r.tail), fanId) end
  end
  put_fan(fanId, f)
  if not sharded(r) then redis.call('ZADD', K_SEEN, int(now), fanId) end
  r.joined = r.joined + 1
  created = 1
  -- an arrival at the head of an empty line may be admitted at once
  if r.openedAt > 0 and r.credit >= 1 and serve(r, now) > 0 then
    f = get_fan(fanId)
    claim_passed(r, fanId, f, now)
  end
end

save_room(r)
-- 'invites': whether the room asks a new place for an invite (the gateway asks a place given back for it too)
return append(fan_view(r, fanId, f, now), 'created', int(created), 'invites', int(r.invites))
