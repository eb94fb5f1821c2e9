--[[
  A fan's place and what it means now; counts as the poll that keeps the place. The poll's rate
  limits are taken here too, first, so a poll is one Redis round trip: a refused poll touches
  nothing of the line (no heartbeat, no admission), as when the limits were calls of their own.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  KEYS[9]     the client IP's bucket for status polls of this event (see includes/token-bucket.lua)
  KEYS[10]    the fan's bucket for status polls of this event
              (both under the event's tag, built by src/waiting-room/keys.ts limitKey; untouched
              when their rate is 0)
  ARGV[1]     fanId
  ARGV[2]     per-IP rate (tokens/s; 0: no per-IP limit)    ARGV[3]  per-IP burst
  ARGV[4]     per-fan rate (tokens/s; 0: no per-fan limit)  ARGV[5]  per-fan burst
  ARGV[6]     a room with fan shards: how long ago (ms) the fan's beat before this poll was, as its
              shard told the caller (beats-1.lua 'poll', which recorded this poll); '' when the
              shard had none. A place lapsed by then is lost, as settle_fan loses it from `seen`.

  Returns the fan view (flat key/value list, see fan_view in includes/views.lua), 'sweep' 1|0
  (includes/admission.lua sweep_due) and 'fanShards' (the room's count), or
    { 'limited', 'ip' | 'fan', 'retryAfterMs', ms }  a limit refused the poll (the per-IP one is
                                                     taken first; when it refuses, the fan's
                                                     bucket is not touched)
    -1  unknown event
    -2  the fan never joined this event
]]
--- @include "admission"
--- @include "views"
--- @include "poll-limits"

local fanId = ARGV[1]
local now = now_ms()
local limited = poll_limited(KEYS[9], KEYS[10], now)
if limited then return limited end

local r = load_room()
if not r then return -1 end
tick(r, now)

local f = get_fan(fanId)
if not f then
  save_room(r)
  return -2
end
if sharded(r) and (f.s == 'p' or f.s == 'w') and r.openedAt > 0 and (ARGV[6] or '') ~= '' then
  if is_stale(r, now - (tonumber(ARGV[6]) or 0), now) then abandon(r, fanId, f) end
end
settle_fan(r, fanId, f, now)
claim_passed(r, fanId, f, now)
-- The heartbeat that keeps the place (abandonment, docs/waiting-room.md): kept on every poll.
-- It is one ZADD inside this call, not a round trip of its own, and without it a fan who closed
-- the tab could not be told from one still watching: the line would admit absent fans into
-- sessions nobody uses, and fans behind them would wait for slots that stay empty.
if (f.s == 'p' or f.s == 'w') and not sharded(r) then redis.call('ZADD', K_SEEN, int(now), fanId) end

local sweep = sweep_due(r, now)
save_room(r)
-- 'sweep' 1: this caller runs the fan shards' sweep now (a gateway serving no line view runs it too)
return append(fan_view(r, fanId, f, now), 'sweep', sweep and '1' or '0', 'fanShards', int(r.fanShards))
