--[[
  The sweep's verdicts, on the event's slot: fans whose shard found no beat for the abandon time
  (lua/waiting-room/beats-1.lua 'stale') give up their places, as a stale fan's does today
  (fans.lua abandon: the record to `x`, the place to `gone` when ahead of the cursor, the count).
  Part of issue 28 goal 3, step 1 (docs/redis-cluster.md): called by the sweep of a room with fan
  shards (src/waiting-room/fan-sweep.ts), once a second; a room without sweeps `seen` in its tick.

  The script checks each verdict again on this master's clock and the room's own state, so a
  caller's mistake cannot take a place the line keeps: nobody is given up before the draw (nor
  while the pre-queue is open), nor within abandonSeconds of the close or the draw, nor a fan whose
  record is no longer pre-queued or waiting (admitted, ended, abandoned already), nor one whose
  reported beat is recent, nor one placed after the sweep began: a fan who rejoined between the
  shard's read and this call holds a place past ARGV[1] (a join writes its beat, then its place),
  and keeps it.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  ARGV[1]     the line's `tail` as read before the shards were (places past it are spared)
  ARGV[2]     '1': the caller read every stale beat there was (no shard filled its page), so the
              sweep is complete with these verdicts; '0': some shard had more than one read takes
              (a mass of fans left at once), and the caller reads again at once
  ARGV[3..]   pairs: fanId, its last beat (ms) as the shard read it

  Returns { 'abandoned', n, 'sweptAt', now, 'done', { fanId, ... } }: sweptAt is recorded in the
  room when the line could lose places and the sweep is complete (0 otherwise: a sweep that is
  behind does not count, so includes/admission.lua sweep_lagging stops admission until the backlog
  is swept, rather than the cursor admitting fans whose beats wait unread); `done` lists the fans
  whose beats the shard may forget (given up now, or no longer in line: admitted, ended, abandoned
  before, unknown), and leaves out every fan spared above, whose beat must stay for a later sweep. Or
    -1  unknown event
]]
--- @include "fans"

local r = load_room()
if not r then return -1 end
local now = now_ms()
local count, sweptAt, done = 0, 0, {}
if r.openedAt > 0 and r.drawn ~= 0 then
  local cutoff = now - r.abandonSeconds * 1000
  local tailBefore = tonumber(ARGV[1]) or 0
  for i = 3, #ARGV - 1, 2 do
    local fanId, beat = ARGV[i], tonumber(ARGV[i + 1]) or 0
    if math.max(beat, r.openedAt, r.drawnAt) < cutoff then
      local f = get_fan(fanId)
      if f and (f.s == 'p' or (f.s == 'w' and f.pos <= tailBefore)) then
        abandon(r, fanId, f)
        count = count + 1
        done[#done + 1] = fanId
      elseif not f or (f.s ~= 'p' and f.s ~= 'w') then
        done[#done + 1] = fanId
      end
    end
  end
  if ARGV[2] == '1' then
    sweptAt = now
    redis.call('HSET', K_ROOM, 'sweptAt', int(now))
  end
end
save_room(r)
return { 'abandoned', int(count), 'sweptAt', int(sweptAt), 'done', done }
