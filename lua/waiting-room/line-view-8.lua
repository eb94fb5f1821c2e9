--[[
  The line as a gateway process caches it (src/waiting-room/line-view.ts), with the heartbeats of
  the fans that process answered from that cache since its last call. Each process calls it for
  each event it serves polls of, every VIEW_REFRESH_MS (100 ms): one round trip per process per
  event per interval, whatever the number of fans, instead of one per poll.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  ARGV[1]     the most vacated places ahead of the cursor to list (the cache counts them in `ahead`)
  ARGV[2..]   fan ids polled since the last call (at most a few thousand: the caller chunks)

  First the heartbeats: each fan still in line (a member of `seen`) is recorded as seen now (Redis
  time, so the place is kept to within one interval of the poll); a fan no longer there (admitted,
  abandoned, ended) is listed in `missing`, and the process sends that fan's next poll here. Then
  the tick (admission.lua), so the line moves even when every poll is answered from caches.
  A room with fan shards (`fanShards` > 0) takes no heartbeats here: the caller sends them to the
  shards (lua/waiting-room/beats-1.lua 'keep') beside this call, and ARGV[2..] are ignored. One
  caller per second is handed the shards' sweep (`sweep` 1: src/waiting-room/fan-sweep.ts).

  Returns a flat key/value list: now, served, tail, preCount, preSize, openedAt, drawn, onSaleAt,
  roomState, rate, full, admitPerSecond, abandonSeconds, epoch, goneAhead (how many vacated places
  are ahead of the cursor), fanShards, sweep (1: this caller runs the sweep now), then 'gone' and its list (ascending places, at most ARGV[1]) and
  'missing' and its list, always the last four elements. Or
    -1  unknown event
]]
--- @include "admission"
--- @include "views"
--- @include "keep-beats"

local r = load_room()
if not r then return -1 end
local now = now_ms()

local missing = {}
if #ARGV > 1 and not sharded(r) then keep_beats(K_SEEN, int(now), missing) end

tick(r, now)
local sweep = sweep_due(r, now)
save_room(r)

local live = live_sessions(now)
local goneAhead = redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '+inf')
local gone = {}
local cap = tonumber(ARGV[1]) or 0
if goneAhead > 0 and cap > 0 then
  gone = redis.call('ZRANGEBYSCORE', K_GONE, '(' .. int(r.served), '+inf', 'LIMIT', 0, cap)
end
local preSize = 0
if r.openedAt == 0 then preSize = redis.call('ZCARD', K_PRE) end

return { 'now', int(now), 'served', int(r.served), 'tail', int(r.tail), 'preCount', int(r.preCount),
  'preSize', int(preSize), 'openedAt', int(r.openedAt), 'drawn', int(r.drawn), 'onSaleAt', int(r.onSaleAt),
  'roomState', room_state(r), 'rate', dec(effective_rate(r, live)), 'full', live >= r.maxActive and 1 or 0,
  'admitPerSecond', r.rateText, 'abandonSeconds', int(r.abandonSeconds), 'epoch', r.epoch,
  'goneAhead', int(goneAhead), 'fanShards', int(r.fanShards), 'sweep', sweep and '1' or '0',
  'gone', gone, 'missing', missing }
