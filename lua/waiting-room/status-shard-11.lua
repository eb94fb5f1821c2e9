--[[
  A status poll that Redis answers, in a room whose records live on the fan shards (room.lua
  shard_records; docs/redis-cluster.md "Steps 2 and 3, call by call", step 2): the event's slot's
  half, after the fan's shard answered its record (fan-records-5.lua 'poll', which recorded the
  beat, gave a lapsed place up and settled a drawn pre-queued fan at its place). What status-10.lua
  answers, from that record: the limits first, the tick, a session past its expiry ended, the claim
  of a passed place (as claims-9.lua 'claim': `claims` makes a retried claim the same claim), then
  the fan view. The caller writes the record this answers back to the shard, compared with the one
  it sent (fan-records-5.lua 'cas'): a claim's before it answers the fan (a record changed
  meanwhile is read again), any other without waiting (`claims` here decided; a record left behind
  is settled the same way by the fan's next poll). A gateway that knows the fan at a place sends
  `w|place` here while its shard's call reads the record, and keeps this answer only when the
  record says that place.

  KEYS[1..8]  the line's keys (includes/room.lua)
  KEYS[9]     claims (claims-9.lua)
  KEYS[10]    the client IP's bucket for status polls of this event   KEYS[11]  the fan's (as status-10.lua)
  ARGV[1]     fanId
  ARGV[2]     per-IP rate (0: none)   ARGV[3] per-IP burst   ARGV[4] per-fan rate (0: none)   ARGV[5] per-fan burst
  ARGV[6]     the fan's record as its shard answered it

  Returns the fan view (includes/views.lua fan_view), 'sweep' 1|0, 'fanShards' K and 'record' (the
  record to write back: '' when unchanged), or
    { 'limited', 'ip' | 'fan', 'retryAfterMs', ms }   -1 unknown event   -2 no record
]]
--- @include "admission"
--- @include "place-claims"
--- @include "views"
--- @include "poll-limits"

local fanId = ARGV[1]
local now = now_ms()
local limited = poll_limited(KEYS[10], KEYS[11], now)
if limited then return limited end

local r = load_room()
if not r then return -1 end
if not shard_records(r) then return redis.error_reply('status-shard: the room keeps its records on the event slot') end
tick(r, now)
local sent = ARGV[6] or ''
if sent == '' then
  save_room(r)
  return -2
end
local f = unpack_fan(sent)

if f.s == 'a' and f.exp <= now then
  -- its session ran out: the expiry was counted when the tick collected it
  f.s = 'e'
elseif f.s == 'a' and not redis.call('ZSCORE', K_ACTIVE, f.sid) then
  -- its session ended before its expiry (end-session-8.lua: a purchase; a revocation writes r on
  -- the shard itself): completed, counted there
  f.s = 'c'
elseif f.s == 'w' and r.openedAt > 0 and f.pos <= r.served then
  -- the place was passed: the claim (includes/place-claims.lua, as claims-9.lua 'claim')
  local kind, sid, exp, at = claim_place(r, f.pos, fanId, now)
  if kind == 'session' then
    f.s, f.sid, f.exp, f.at = 'a', sid, exp, at
  elseif kind == 'revoked' then
    f.s = 'r'
  else
    f.s = 'x'
  end
end

local record = pack_fan(f)
local sweep = sweep_due(r, now)
save_room(r)
return append(fan_view(r, fanId, f, now), 'sweep', sweep and '1' or '0', 'fanShards', int(r.fanShards),
  'record', record ~= sent and record or '')
