--[[
  A batch of joins' call on the event's slot in a room whose records live on the fan shards
  (room.lua shard_records; docs/redis-cluster.md "Steps 2 and 3, call by call", step 1): the
  room's checks, the tick, and one range of places (or arrival numbers, while the pre-queue is
  open) for the fans it lets through. It reads no record and is sent no fan id: what a join costs
  this slot does not depend on who joins. As a rule one HMGET and two HINCRBYs: the tick runs only
  when the close is due or the line is empty. The fans' shards then write the records
  (fan-records-5.lua 'join'). Built ahead of its caller (the gateway's join batch in such a room).

  KEYS[1..8]  the line's keys (includes/room.lua)
  ARGV[1]     n, the number of fans
  ARGV[2]     the room's epoch and ARGV[3] its fan shards, as the caller knows them: another epoch
              or count answers { 'reshard', K } and touches nothing
  ARGV[4]     w: 0, no per-fan argument (the room asks no proof of work and no invite as the
              caller knows it), or 2: two per fan follow, in arrival order: the bits of the proof
              of work the gateway checked (0 none), and '1' when it checked an operator's invite

  Returns
    { 'range', kind, first, startMs, abandonMs, tail, served, outcome 1, ..., outcome n }
      kind 'w' places or 'p' arrival numbers (by this slot's clock: the close, at onSaleAt, is
      made here when due); the j-th fan let through takes first + j; outcome 0 let through, or
      'pow' (the room asks more bits), 'invite' (the room asks an invite): those take nothing.
      startMs: the abandon clock's start for the shards (max of the close and the draw; 0 while
      the draw is pending: nobody lapses), abandonMs: the room's abandon time. tail and served:
      the line after the call (the answers' `ahead` is place - served - 1 less the vacated places,
      which the caller's view knows)
    { 'reshard', K }   -1 unknown event   -3 the room is closed: no new places
]]
--- @include "admission"

local n, epochKnown, shardsKnown, w = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0
local now = now_ms()

-- The fans the room's settings let through: outcome 0, or 'pow' / 'invite' (they take nothing).
local function outcomes(powBits, invites, out, from)
  local k = 0
  for i = 1, n do
    local outcome = 0
    if w >= 2 then
      local bits, invite = tonumber(ARGV[4 + 2 * i - 1]) or 0, ARGV[4 + 2 * i]
      if powBits > bits then
        outcome = 'pow'
      elseif invites ~= 0 and invite ~= '1' then
        outcome = 'invite'
      end
    elseif powBits > 0 then
      outcome = 'pow'
    elseif invites ~= 0 then
      outcome = 'invite'
    end
    if outcome == 0 then k = k + 1 end
    out[from + i] = outcome
  end
  return k
end

-- As join-batch-n.lua: the fields a batch needs, no tick (the admitter's refreshes tick), unless
-- the close is due or the line is empty (an arrival at its head may be offered at once): then the
-- room is loaded whole and ticked. So a batch costs this slot one HMGET and two HINCRBYs.
local FIELDS = { 'onSaleAt', 'openedAt', 'closed', 'powBits', 'invites', 'epoch', 'fanShards', 'claims',
  'served', 'tail', 'drawn', 'drawnAt', 'abandonSeconds' }
local v = redis.call('HMGET', K_ROOM, unpack(FIELDS))
if not v[1] then return -1 end
local shards = tonumber(v[7]) or 0
if shards ~= shardsKnown or (v[6] or '') ~= epochKnown then return { 'reshard', int(shards) } end
if (tonumber(v[8]) or 0) ~= 2 then return redis.error_reply('line-range: the room keeps its records on the event slot') end
if (tonumber(v[3]) or 0) ~= 0 then return -3 end
local openedAt, served, tail = tonumber(v[2]) or 0, tonumber(v[9]) or 0, tonumber(v[10]) or 0
local abandonMs = (tonumber(v[13]) or 0) * 1000
local out = { 'range', '', 0, 0, int(abandonMs), 0, 0 }
local kind, first, k

if (openedAt == 0 and now < (tonumber(v[1]) or 0)) or (openedAt > 0 and served < tail) then
  k = outcomes(tonumber(v[4]) or 0, tonumber(v[5]) or 0, out, 7)
  if openedAt == 0 then
    kind = 'p'
    first = k > 0 and redis.call('HINCRBY', K_ROOM, 'preSeq', k) - k or 0
  else
    kind = 'w'
    first = k > 0 and redis.call('HINCRBY', K_ROOM, 'tail', k) - k or tail
    tail = first + k
  end
  if k > 0 then redis.call('HINCRBY', K_ROOM, 'joined', k) end
  local startMs = 0
  if openedAt > 0 and (tonumber(v[11]) or 0) ~= 0 then startMs = math.max(openedAt, tonumber(v[12]) or 0) end
  out[2], out[3], out[4], out[6], out[7] = kind, int(first), int(startMs), int(tail), int(served)
  return out
end

-- The close is due, or the line is empty: the whole room, ticked.
local r = load_room()
tick(r, now)
k = outcomes(r.powBits, r.invites, out, 7)
kind, first = 'w', 0
if r.openedAt == 0 then
  kind = 'p'
  first = r.preSeq
  r.preSeq = r.preSeq + k
else
  first = r.tail
  r.tail = r.tail + k
end
r.joined = r.joined + k
-- an arrival at the head of an empty line may be offered its place at once (it claims it next)
if kind == 'w' and k > 0 and r.credit >= 1 then serve(r, now) end
save_room(r)

local startMs = 0
if r.openedAt > 0 and r.drawn ~= 0 then startMs = math.max(r.openedAt, r.drawnAt) end
out[2], out[3], out[4], out[6], out[7] = kind, int(first), int(startMs), int(r.tail), int(r.served)
return out
