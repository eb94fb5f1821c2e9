--[[
  The line as a gateway process caches it (src/waiting-room/line-view.ts), with the heartbeats of
  the fans that process answered from that cache since its last call. Each process calls it for
  each event it serves polls of, every VIEW_REFRESH_MS (100 ms): one round trip per process per
  event per interval, whatever the number of fans, instead of one per poll.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  ARGV[1]     the most vacated places ahead of the cursor to list (the cache counts them in `ahead`)
  ARGV[2]     L, the number of lookups (0: none)
  ARGV[3]     how recent (ms) a looked-up fan's last beat must be
  ARGV[4]     the version of the vacated places the caller holds ('' for none): when it is still the
              room's, the list is not sent again (`goneSame` 1)
  ARGV[5]     the caller's admitter id ('' for none): in a room with fan shards, the caller asks to be
              the line's admitter (below)
  ARGV[6..5+L] lookups: fans that polled the caller, which does not know them (they joined or last
              polled through another process)
  ARGV[6+L..] fan ids polled since the last call (at most a few thousand: the caller chunks)

  The admitter (a room with fan shards): one gateway at a time holds the room's lease (`admitter`,
  `admitterUntil` in the room hash, LEASE_MS of this master's clock, renewed by each of its calls;
  taken by any caller once it has lapsed). It calls here every refresh and writes the view it gets
  into copies on the room's first shards (view-copy-1.lua); every other gateway reads its view
  from a copy, beside its heartbeats, and calls here only for its lookups, its first view, after
  changing the room, or when the copy is older than a few refreshes (the admitter gone: its lease
  lapses, and the next such caller takes it). So the event's slot runs the tick and the view about
  ten times a second whatever the number of gateways (line-view.ts).

  The vacated places' version is `<epoch>:<abandoned>`: a place is added to `gone` only when a fan
  is given up (includes/fans.lua `abandon`, which counts it in `abandoned`), and the cursor passing
  places only removes the ones behind it, which the caller drops itself. So a caller whose version
  is the room's holds every place the list would give, less those the cursor passed: every gateway
  reads its view ten times a second, and the list (up to ARGV[1] places) was most of a refresh's
  cost once many fans had left.

  First the heartbeats: each fan still in line (a member of `seen`) is recorded as seen now (Redis
  time, so the place is kept to within one interval of the poll); a fan no longer there (admitted,
  abandoned, ended) is listed in `missing`, and the process sends that fan's next poll here. Then
  the tick (admission.lua), so the line moves even when every poll is answered from caches.
  A room with fan shards (`fanShards` > 0) takes no heartbeats here: the caller sends them to the
  shards (lua/waiting-room/beats-1.lua 'keep') beside this call, and the beats are ignored; its
  lookups are answered from the records alone (the beats are the shards': beats-1.lua 'look',
  sent beside this call, checks and records them, and a fan is found when both find it). Since
  2026-12-06 night a gateway reads a sharded room's records for its lookups by plain commands
  beside its refresh (line-view.ts lookUpRecords) and sends none here; they are still answered for
  a gateway of an earlier version. One
  caller per second is handed the shards' sweep (`sweep` 1: src/waiting-room/fan-sweep.ts).

  Then the lookups, after the tick (so against the cursor as it now stands): a fan is `found`, and
  its beat recorded now as any heartbeat's, when its record is waiting behind the cursor (or
  pre-queued while the pre-queue is open, or pre-queued with a drawn place behind the cursor) and its last beat is younger than ARGV[3], which the
  caller sets so that no sweep can have given the place up meanwhile (a fan whose beat is older
  may be losing it: Redis answers that poll, status-10.lua). The caller learns the fans found and
  answers their polls from its view; it sends the others' polls here as before.

  Returns a flat key/value list: now, served, tail, preCount, preSize, openedAt, drawn, drawnAt
  (with openedAt and abandonSeconds the abandon clock a poll in a room whose records live on the
  shards judges by), onSaleAt, roomState, rate, full, admitPerSecond, abandonSeconds, epoch, goneAhead (how many vacated places
  are ahead of the cursor), goneVersion, goneSame (1: the caller's list stands, `gone` is empty),
  fanShards, sweep (1: this caller runs the sweep now), lease (1: this caller is the admitter), then 'gone' and its list (ascending places, at most ARGV[1]),
  'missing' and its list and 'found' and its list (one a lookup, in ARGV order: 0 not found, else
  the fan's place, or its arrival number while the pre-queue is open: `openedAt` 0 says which),
  always the last six elements. Or
    -1  unknown event
]]
--- @include "admission"
--- @include "views"
--- @include "keep-beats"

local BYTE_W, BYTE_P = string.byte('w'), string.byte('p')
-- How long the admitter's lease runs past its last call (this master's clock). Kept in step with
-- src/waiting-room/line-view.ts (a copy older than COPY_MAX_AGE_MS sends its reader here).
local LEASE_MS = 1000

local r = load_room()
if not r then return -1 end
local now = now_ms()

local lookups = tonumber(ARGV[2]) or 0
local missing = {}
if #ARGV > 5 + lookups and not sharded(r) then keep_beats(K_SEEN, int(now), missing, 6 + lookups) end

tick(r, now)
local sweep = sweep_due(r, now)
save_room(r)

local lease = false
local candidate = ARGV[5] or ''
if candidate ~= '' and sharded(r) then
  if (r.admitter or '') == '' or r.admitter == candidate or (r.admitterUntil or 0) <= now then
    redis.call('HSET', K_ROOM, 'admitter', candidate, 'admitterUntil', int(now + LEASE_MS))
    lease = true
  end
end

local found = {}
if lookups > 0 then
  local ids = { unpack(ARGV, 6, 5 + lookups) }
  local records = redis.call('HMGET', K_FANS, unpack(ids))
  local shards = sharded(r)
  local beats = shards and {} or redis.call('ZMSCORE', K_SEEN, unpack(ids))
  local recent = now - (tonumber(ARGV[3]) or 0)
  -- Only the record's letter and one number are read (not unpack_fan's six fields): before the
  -- close a pre-queued fan's arrival number, after it a waiting fan's place.
  local opened, served = r.openedAt > 0, r.served
  local nowText, kept = int(now), { 'XX', 'GT' }
  for i, fanId in ipairs(ids) do
    local raw, place = records[i], 0
    if raw and (shards or (tonumber(beats[i]) or 0) > recent) then
      local letter = string.byte(raw)
      if opened then
        if letter == BYTE_W then
          place = tonumber(string.match(raw, '^w|(%d+)')) or 0
        elseif letter == BYTE_P and r.drawn ~= 0 then
          -- pre-queued, drawn, the place not yet looked up by a poll of its own (fans.lua
          -- settle_fan): the draw's, as place_of reads it. After the draw every pre-queued fan's
          -- next poll is such a lookup, not a status-10.lua call each (the on-sale's herd)
          place = tonumber(redis.call('ZSCORE', K_PRE, fanId)) or 0
        end
        if place <= served then place = 0 end
      elseif letter == BYTE_P then
        place = tonumber(string.match(raw, '^p|%d+|(%d+)')) or 0
      end
      if place > 0 and not shards then
        kept[#kept + 1] = nowText
        kept[#kept + 1] = fanId
      end
    end
    found[i] = place
  end
  if #kept > 2 then redis.call('ZADD', K_SEEN, unpack(kept)) end
end

local live = live_sessions(now)
local goneAhead = redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '+inf')
local gone = {}
local cap = tonumber(ARGV[1]) or 0
local goneVersion = r.epoch .. ':' .. int(r.abandoned)
local goneSame = ARGV[4] == goneVersion
if goneAhead > 0 and cap > 0 and not goneSame then
  gone = redis.call('ZRANGEBYSCORE', K_GONE, '(' .. int(r.served), '+inf', 'LIMIT', 0, cap)
end
local preSize = 0
-- its members here, or the arrival numbers given in a room whose records live on the fan shards
if r.openedAt == 0 then preSize = pre_card(r) end

return { 'now', int(now), 'served', int(r.served), 'tail', int(r.tail), 'preCount', int(r.preCount),
  'preSize', int(preSize), 'openedAt', int(r.openedAt), 'drawn', int(r.drawn), 'drawnAt', int(r.drawnAt), 'onSaleAt', int(r.onSaleAt),
  'roomState', room_state(r), 'rate', dec(effective_rate(r, live)), 'full', live >= r.maxActive and 1 or 0,
  'admitPerSecond', r.rateText, 'abandonSeconds', int(r.abandonSeconds), 'epoch', r.epoch,
  'goneAhead', int(goneAhead), 'goneVersion', goneVersion, 'goneSame', goneSame and '1' or '0',
  'fanShards', int(r.fanShards), 'recordsOnShards', shard_records(r) and '1' or '0',
  'sweep', sweep and '1' or '0', 'lease', lease and '1' or '0',
  'gone', gone, 'missing', missing, 'found', found }
