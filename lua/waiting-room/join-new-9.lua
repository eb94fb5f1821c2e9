--[[
  The common join, without the line's tick: a fan new to the line, while the line is neither empty
  nor due to close. It reads the dozen room fields it needs (HMGET, not the whole room), takes the
  next place (or pre-queue arrival number) with HINCRBY, and writes the fan's record, its place and
  its heartbeat: about a dozen commands whatever the line's size. The tick runs elsewhere (every
  poll that asks Redis, every gateway's view refresh: line-view-8.lua), so admission does not wait
  for joins. Every other join is join-9.lua's, which this script hands back to:

    the fan already has a record (a repeat join, a rejoin after losing the place, a revoked fan),
    the pre-queue is due to close (Redis time at or past onSaleAt, not yet closed),
    the line is empty (an arrival at its head may be admitted in the same call).

  KEYS[1..9]  as join-9.lua: room, fans, pre, fifo, seen, gone, active, sessions, the IP's bucket
  ARGV[1..5]  as join-9.lua: fanId, per-IP rate and burst, proof-of-work bits, invite checked

  Returns what join-9.lua returns for a new place (the fan view plus 'created' 1), or
    { 'limited', 'ip', 'retryAfterMs', ms }  the per-IP limit refused the join (taken first)
    { 'refused', ... }                       as join-9.lua
    { 'join' }                               join-9.lua decides (the limit already taken)
    -1  unknown event      -3  the room is closed
]]
--- @include "views"
--- @include "token-bucket"

local fanId = ARGV[1]
local now = now_ms()
local ipRate = tonumber(ARGV[2])
if ipRate > 0 then
  local allowed, retry = take_token(KEYS[9], ipRate, tonumber(ARGV[3]), 1, now)
  if allowed == 0 then return { 'limited', 'ip', 'retryAfterMs', int(retry) } end
end

local FIELDS = { 'onSaleAt', 'openedAt', 'closed', 'paused', 'admitPerSecond', 'maxActive', 'sessionSeconds',
  'abandonSeconds', 'lastRate', 'served', 'tail', 'powBits', 'invites', 'drawn', 'epoch' }
local v = redis.call('HMGET', K_ROOM, unpack(FIELDS))
if not v[1] then return -1 end
local r = { raw = { admitPerSecond = v[5] } }
for i, f in ipairs(FIELDS) do r[f] = tonumber(v[i]) or 0 end
r.epoch = v[15] or ''

if (r.openedAt == 0 and now >= r.onSaleAt) or (r.openedAt > 0 and r.served >= r.tail) then return { 'join' } end
if redis.call('HEXISTS', K_FANS, fanId) == 1 then return { 'join' } end
if r.closed ~= 0 then return -3 end
if r.powBits > (tonumber(ARGV[4]) or 0) then return { 'refused', 'pow', 'powBits', int(r.powBits) } end
if r.invites ~= 0 and ARGV[5] ~= '1' then return { 'refused', 'invite' } end

local f = { s = 'w', pos = 0, n = 0, sid = '', exp = 0, at = 0 }
if r.openedAt == 0 then
  f.s = 'p'
  f.n = redis.call('HINCRBY', K_ROOM, 'preSeq', 1)
  redis.call('ZADD', K_PRE, 0, pre_member(r, fanId))
else
  f.pos = redis.call('HINCRBY', K_ROOM, 'tail', 1)
  redis.call('ZADD', K_FIFO, f.pos, fanId)
end
redis.call('HINCRBY', K_ROOM, 'joined', 1)
put_fan(fanId, f)
redis.call('ZADD', K_SEEN, now, fanId)
return append(fan_view(r, fanId, f, now), 'created', '1')
