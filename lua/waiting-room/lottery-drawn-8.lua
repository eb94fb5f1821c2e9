--[[
  The end of the draw (src/waiting-room/draw.ts): the drawer has written every pre-queued fan's
  place (1..preCount) as its score in KEYS[3] (pre); this flips `drawn`, records what the order
  was drawn from (revealed from now on in the snapshot), and lets admission reach the pre-queue.
  It also records `drawnAt` (Redis time), where every abandon clock starts at the earliest
  (includes/fans.lua is_stale): the pre-queue was told to come back at the on-sale, and the
  draw may have waited minutes after the close for its beacon.
  Idempotent: on a drawn room it changes nothing, but for an empty pre-queue drawn at the close
  whose seed Redis never had: that seed is recorded then. Refuses a membership whose places are not
  exactly 1..preCount (a draw that did not finish writing them).

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  ARGV[1]     seed (revealed)
  ARGV[2]     membership hash M
  ARGV[3]     beacon ('' when none)
  ARGV[4]     draw key K
  ARGV[5]     a room whose records live on the fan shards (room.lua shard_records): how many fans
              the draw placed (its members, read from the shards' pre-queues, which the drawer
              wrote 1..members into). Fewer than preCount when arrival numbers were given and never
              written (a gateway lost mid-join): places members+1..preCount are vacated here, so
              the cursor skips them

  Returns the snapshot plus 'changed' 1|0, or
    -1  unknown event
    -8  the pre-queue has not closed yet (Redis time < onSaleAt)
    -9  the places written do not cover 1..preCount (shard records: more members than preCount)
]]
--- @include "admission"
--- @include "views"

local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)
if r.openedAt == 0 then
  save_room(r)
  return -8
end
local changed = 0
if r.drawn == 0 then
  if shard_records(r) then
    local members = tonumber(ARGV[5]) or -1
    if members < 0 or members > r.preCount then
      save_room(r)
      return -9
    end
    for place = members + 1, r.preCount do redis.call('ZADD', K_GONE, place, place) end
    -- the arrival numbers nobody holds (a repeat join's, a gateway's lost mid-join) were counted
    -- joined by the range: the pre-queue joined as its members
    r.joined = math.max(0, r.joined - (r.preCount - members))
  elseif redis.call('ZCARD', K_PRE) ~= r.preCount
    or redis.call('ZCOUNT', K_PRE, 1, r.preCount) ~= r.preCount then
    save_room(r)
    return -9
  end
  redis.call('HSET', K_ROOM, 'seed', ARGV[1], 'membershipHash', ARGV[2], 'beacon', ARGV[3], 'drawKey', ARGV[4])
  r.seed, r.membershipHash, r.beacon, r.drawKey = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  r.drawn = 1
  -- the abandon clock of every place starts here at the earliest (includes/fans.lua is_stale)
  r.drawnAt = now
  changed = 1
  tick(r, now)
elseif r.preCount == 0 and r.seed == '' and ARGV[1] ~= '' then
  -- An empty pre-queue is marked drawn at the close (includes/prequeue.lua), with nothing to
  -- order; with the seed kept out of Redis (committed in DynamoDB) it is revealed here, once.
  redis.call('HSET', K_ROOM, 'seed', ARGV[1], 'membershipHash', ARGV[2], 'beacon', ARGV[3], 'drawKey', ARGV[4])
  r.seed, r.membershipHash, r.beacon, r.drawKey = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  changed = 1
end
save_room(r)
return append(snapshot(r, now), 'changed', int(changed))
