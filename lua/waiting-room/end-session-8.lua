--[[
  End an admitted session before its expiry: the fan completed a purchase, or the operator
  revoked it. Frees its slot at once (and fills it if the budget allows). Idempotent.
  A revocation also bars the fan from taking a new place in this event.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  ARGV[1]     sessionId
  ARGV[2]     'completed' | 'revoked'

  Returns 'freed' 1|0 (0: the session had already ended), 'fanId', 'status' (the fan's state
  after the call), or
    -1  unknown event
    -6  no such session in this event
]]
--- @include "admission"

local sid, reason = ARGV[1], ARGV[2]
local r = load_room()
if not r then return -1 end
local fanId = redis.call('HGET', K_SESSIONS, sid)
if not fanId then return -6 end
local now = now_ms()
tick(r, now)

local f = get_fan(fanId)
local mine = f and f.sid == sid
if mine then settle_fan(r, fanId, f, now) end
local freed = 0
local exp = tonumber(redis.call('ZSCORE', K_ACTIVE, sid))
if exp and exp > now then
  redis.call('ZREM', K_ACTIVE, sid)
  freed = 1
end
if mine then
  if reason == 'revoked' and f.s ~= 'r' then
    f.s = 'r'
    put_fan(fanId, f)
    r.revoked = r.revoked + 1
  elseif reason == 'completed' and freed == 1 then
    f.s = 'c'
    put_fan(fanId, f)
    r.completed = r.completed + 1
  end
end
-- A room whose records live on the fan shards has no record here: the session ends in `active`,
-- counted as above, and the fan's shard record is settled by its next poll (status-shard-11.lua
-- reads an admitted record whose session left `active` early as completed) or, for a revocation,
-- by the caller (sessions.ts: the record to r on the shard).
local status = 'unknown'
if not f and shard_records(r) then
  if freed == 1 then
    if reason == 'revoked' then r.revoked = r.revoked + 1 else r.completed = r.completed + 1 end
    status = reason
  elseif exp then
    status = 'expired'
  else
    -- ended before (completed, revoked or expired and collected): this call's kind, as a repeat of it
    status = reason
  end
end
if freed == 1 then serve(r, now) end

save_room(r)
if f then status = STATE_NAMES[f.s] end
return { 'freed', int(freed), 'fanId', fanId, 'status', status }
