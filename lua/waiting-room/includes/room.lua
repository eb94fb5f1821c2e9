--[[
  The room: the line's keys, its settings and runtime state, and how numbers leave a script.
  Every waiting-room include starts from this one. src/redis/scripts.ts (the one loader) inlines
  it, once, wherever a script or include says `--- @include "room"`, so every script of the line
  takes the same eight keys first, all under the event's hash tag {evt:<eventId>}
  (src/waiting-room/keys.ts lineKeys):

    KEYS[1] room      HASH  settings, lottery (seed, commitment), epoch, cursor, budget, counters,
                            openedAt (the close), drawnAt (the draw: no abandon clock starts
                            before it; lottery-drawn-8.lua), admitter and admitterUntil (a room
                            with fan shards: the gateway whose refreshes write the view's copies,
                            line-view-8.lua)
    KEYS[2] fans      HASH  fanId -> place record "s|pos|n|sid|exp|at" (see fans.lua)
    KEYS[3] pre       ZSET  the pre-queue: member the plain fan id (prequeue.lua pre_member),
                            score 0 until the draw writes each fan's place as its score; its
                            membership is frozen at the close (prequeue.lua open_if_due)
    KEYS[4] fifo      ZSET  fanId -> place, fans placed after the draw and not yet reached
    KEYS[5] seen      ZSET  fanId -> last join/poll (ms), fans still in line; empty when the room
                            has fan shards (`fanShards` K > 0, set at creation and never changed:
                            the heartbeats live in K shards under tags of their own, swept by the
                            gateways, src/waiting-room/fan-shards.ts and fan-sweep.ts)
    KEYS[6] gone      ZSET  places vacated by abandonment (member = score = place); only the part
                            ahead of the cursor counts, the rest is dropped a little per call
    KEYS[7] active    ZSET  sessionId -> session expiry (ms)
    KEYS[8] sessions  HASH  sessionId -> fanId

  The room's `epoch` is a random id given when the room is created (never changed afterwards).
  Queue and access tokens carry it: a room created again after Redis lost its data has another
  epoch, which is how a session check tells "this room ended that session" from "this room never
  knew it" (see session-active-3.lua).

  Nothing here runs on a timer: every script first calls tick() (admission.lua), which settles
  what elapsed Redis time owes. One clock: now_ms() (lua/includes/now-ms.lua).

  Defines  K_ROOM .. K_SESSIONS        the eight keys
           int(n), dec(n)              every number leaves a script through these
           append(list, ...)           adds fields to a flat key/value reply
           load_room() -> r | nil      the room hash as a table (nil: no room)
           room_raw(r)                 the room hash's fields as stored, text (built on first use)
           save_room(r)                writes back the runtime fields that changed
           room_state(r)               'closed' | 'prequeue' | 'paused' | 'open'
           sharded(r)                  the room keeps its heartbeats in fan shards, not in `seen`
           claims(r), OFFER            the cursor offers sessions the fans claim (below)
           shard_records(r)            the fans' records live on the fan shards, not in `fans`
  Needs    now-ms
]]
--- @include "now-ms"

local K_ROOM, K_FANS, K_PRE, K_FIFO, K_SEEN, K_GONE, K_ACTIVE, K_SESSIONS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]

-- powBits, invites: what a join must bring for a new place (join-9.lua); absent = 0 (off)
local SETTINGS = { 'onSaleAt', 'admitPerSecond', 'maxActive', 'sessionSeconds', 'abandonSeconds',
  'paused', 'closed', 'powBits', 'invites' }
local RUNTIME = { 'openedAt', 'preCount', 'preSeq', 'tail', 'served', 'credit', 'accruedAt',
  'sessSeq', 'winStart', 'winCount', 'lastRate', 'joined', 'admitted', 'abandoned', 'completed',
  'expired', 'revoked', 'drawn', 'drawnAt', 'fanShards', 'sweepAt', 'sweptAt', 'claims', 'offered' }
local FRACTIONAL = { credit = true, lastRate = true }

-- Lua would print large numbers as 1.7e+12 when concatenated; every integer leaves through here.
local function int(n)
  return string.format('%d', n)
end

local function dec(n)
  return string.format('%.9f', n)
end

local function append(list, ...)
  for _, v in ipairs({ ... }) do list[#list + 1] = v end
  return list
end

local NOT_NUMERIC = { seed = true, commitment = true, epoch = true, membershipHash = true, beacon = true,
  drawKey = true, admitter = true }

-- The room as a table: every field of SETTINGS and RUNTIME 0 until the hash says otherwise, the
-- text fields ''. Written as constructors that name each field (test/waiting-room/unit.test.ts
-- checks they name exactly SETTINGS and RUNTIME), so Lua sizes each table once: filled a field at a
-- time, a table is rehashed at every power of two, and that was the largest part of load_room in a
-- callgrind profile of status-10.lua. `saved` holds RUNTIME's values as read (save_room writes
-- back those that changed).
local function new_room()
  return { raw = false, fields = false, rateText = '0', saved = false, seed = '', commitment = '', epoch = '', membershipHash = '', beacon = '',
    drawKey = '',
    onSaleAt = 0, admitPerSecond = 0, maxActive = 0, sessionSeconds = 0, abandonSeconds = 0,
    paused = 0, closed = 0, powBits = 0, invites = 0,
    openedAt = 0, preCount = 0, preSeq = 0, tail = 0, served = 0, credit = 0, accruedAt = 0,
    sessSeq = 0, winStart = 0, winCount = 0, lastRate = 0, joined = 0, admitted = 0, abandoned = 0, completed = 0,
    expired = 0, revoked = 0, drawn = 0, drawnAt = 0, fanShards = 0, sweepAt = 0, sweptAt = 0, claims = 0, offered = 0 }
end

local function new_saved()
  return { openedAt = 0, preCount = 0, preSeq = 0, tail = 0, served = 0, credit = 0, accruedAt = 0,
    sessSeq = 0, winStart = 0, winCount = 0, lastRate = 0, joined = 0, admitted = 0, abandoned = 0, completed = 0,
    expired = 0, revoked = 0, drawn = 0, drawnAt = 0, fanShards = 0, sweepAt = 0, sweptAt = 0, claims = 0,
    offered = 0 }
end

local function load_room()
  local v = redis.call('HGETALL', K_ROOM)
  if #v == 0 then return nil end
  local r, saved = new_room(), new_saved()
  for i = 1, #v, 2 do
    local f, x = v[i], v[i + 1]
    if NOT_NUMERIC[f] then
      r[f] = x
    else
      local n = tonumber(x) or 0
      r[f] = n
      if saved[f] ~= nil then saved[f] = n end
      -- as the operator wrote it ('12.5'): every fan view sends it, so it is kept here and the
      -- view needs no room_raw
      if f == 'admitPerSecond' then r.rateText = x end
    end
  end
  r.fields, r.saved = v, saved
  return r
end

-- The room hash's fields as stored (text), built on first use: the scripts that read them are the
-- operator's (configure, settings, the snapshot), so a poll or a join never pays for the table.
local function room_raw(r)
  if not r.raw then
    local raw, v = {}, r.fields or {}
    for i = 1, #v, 2 do raw[v[i]] = v[i + 1] end
    r.raw = raw
  end
  return r.raw
end

local function save_room(r)
  local args = {}
  for _, f in ipairs(RUNTIME) do
    if r[f] ~= r.saved[f] then
      args[#args + 1] = f
      if FRACTIONAL[f] then args[#args + 1] = dec(r[f]) else args[#args + 1] = int(r[f]) end
      r.saved[f] = r[f]
    end
  end
  if #args > 0 then redis.call('HSET', K_ROOM, unpack(args)) end
end

local function sharded(r)
  return r.fanShards > 0
end

-- A room created with `claims` (WAITING_ROOM_CLAIMS): the cursor passes places by count and offers
-- each one a session, which the fan at that place claims at its next poll (admission.lua
-- offer_places, claim_passed). An offer is a member of `active` (OFFER .. place, scored with the
-- time it is given back), so it counts against maxActive as a session does until it is claimed,
-- given up with its place, or given back. `offered` counts the offers outstanding.
local OFFER = 'offer:'

local function claims(r)
  return r.claims > 0
end

-- `claims` 2 (issue 28 steps 2 and 3, docs/redis-cluster.md "Steps 2 and 3, call by call"): the
-- fans' records, the pre-queue and the beats live on the fan shards (fan-records-5.lua), and the
-- event's slot holds none: it reserves ranges of places (line-range-8.lua) and keeps the claims
-- (claims-9.lua). No room is created so yet: its callers are being built.
local function shard_records(r)
  return r.claims == 2
end

local function room_state(r)
  if r.closed ~= 0 then return 'closed' end
  if r.openedAt == 0 then return 'prequeue' end
  if r.paused ~= 0 or r.admitPerSecond <= 0 then return 'paused' end
  return 'open'
end
