--[[
  A batch of joins' call on the event's slot in a room whose records live on the fan shards
  (room.lua shard_records; docs/redis-cluster.md "Steps 2 and 3, call by call", step 1): the
  room's checks, the tick, and one range of places (or arrival numbers, while the pre-queue is
  open) for the fans it lets through. It reads no record and is sent no fan id: what a join costs
  this slot does not depend on who joins. The fans' shards then write the records
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
local r = load_room()
if not r then return -1 end
if r.fanShards ~= shardsKnown or r.epoch ~= epochKnown then return { 'reshard', int(r.fanShards) } end
if not shard_records(r) then return redis.error_reply('line-range: the room keeps its records on the event slot') end
local now = now_ms()
tick(r, now)
if r.closed ~= 0 then
  save_room(r)
  return -3
end

local out = { 'range', '', 0, 0, int(r.abandonSeconds * 1000), 0, 0 }
local k = 0
for i = 1, n do
  local outcome = 0
  if w >= 2 then
    local bits, invite = tonumber(ARGV[4 + 2 * i - 1]) or 0, ARGV[4 + 2 * i]
    if r.powBits > bits then
      outcome = 'pow'
    elseif r.invites ~= 0 and invite ~= '1' then
      outcome = 'invite'
    end
  elseif r.powBits > 0 then
    outcome = 'pow'
  elseif r.invites ~= 0 then
    outcome = 'invite'
  end
  if outcome == 0 then k = k + 1 end
  out[7 + i] = outcome
end

local kind, first = 'w', 0
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
