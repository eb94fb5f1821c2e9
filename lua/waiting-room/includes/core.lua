--[[
  Waiting-room core. Not a script of its own: src/waiting-room/scripts.ts inlines this file
  wherever a script says `--- @include "core"` (the bullmq convention), so every script that
  includes it takes the same eight keys first, all under the event's hash tag {evt:<eventId>}:

    KEYS[1] room      HASH  settings, lottery (seed, commitment), epoch, cursor, budget, counters
    KEYS[2] fans      HASH  fanId -> place record "s|pos|n|sid|exp|at" (see get_fan)
    KEYS[3] pre       ZSET  the pre-queue: score 0, member sha1hex(seed .. ':' .. fanId) .. fanId,
                            so lexicographic order IS the lottery order; frozen once drawn
    KEYS[4] fifo      ZSET  fanId -> place, fans placed after the draw and not yet reached
    KEYS[5] seen      ZSET  fanId -> last join/poll (ms), fans still in line
    KEYS[6] gone      ZSET  places vacated by abandonment (member = score = place); only the part
                            ahead of the cursor counts, the rest is dropped a little per call
    KEYS[7] active    ZSET  sessionId -> session expiry (ms)
    KEYS[8] sessions  HASH  sessionId -> fanId

  The room's `epoch` is a random id given when the room is created (never changed afterwards).
  Queue and access tokens carry it: a room created again after Redis lost its data has another
  epoch, which is how a session check tells "this room ended that session" from "this room never
  knew it" (see session-active-2.lua).

  Places: the pre-queue, once drawn, holds places 1..preCount in lottery order (place = ZRANK+1);
  later arrivals take preCount+1, preCount+2, ... The cursor `served` is the last place reached.
  Nothing here runs on a timer: every script first calls tick(), which settles what elapsed
  Redis time owes (the draw at onSaleAt, expired sessions, abandoned places, admissions).
  Each call does bounded work (MAX_* below); whatever is left is carried to the next call.
  One clock: redis.call('TIME').
]]

local K_ROOM, K_FANS, K_PRE, K_FIFO, K_SEEN, K_GONE, K_ACTIVE, K_SESSIONS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]

local MAX_STEPS = 256      -- places the cursor passes (admitted or skipped) per call
local MAX_SWEEP = 128      -- abandoned fans detected per call
local MAX_EXPIRE = 128     -- expired sessions collected per call
local RATE_WINDOW_MS = 10000

local SETTINGS = { 'onSaleAt', 'admitPerSecond', 'maxActive', 'sessionSeconds', 'abandonSeconds',
  'paused', 'closed' }
local RUNTIME = { 'openedAt', 'preCount', 'preSeq', 'tail', 'served', 'credit', 'accruedAt',
  'sessSeq', 'winStart', 'winCount', 'lastRate', 'joined', 'admitted', 'abandoned', 'completed',
  'expired', 'revoked' }
local FRACTIONAL = { credit = true, lastRate = true }
local STATE_NAMES = { p = 'prequeue', w = 'waiting', a = 'admitted', x = 'abandoned',
  c = 'completed', e = 'expired', r = 'revoked' }

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Lua would print large numbers as 1.7e+12 when concatenated; every integer leaves through here.
local function int(n)
  return string.format('%d', n)
end

local function dec(n)
  return string.format('%.9f', n)
end

local NOT_NUMERIC = { seed = true, commitment = true, epoch = true }

local function load_room()
  local v = redis.call('HGETALL', K_ROOM)
  if #v == 0 then return nil end
  local r = { raw = {}, saved = {}, seed = '', commitment = '', epoch = '' }
  for _, f in ipairs(SETTINGS) do r[f] = 0 end
  for _, f in ipairs(RUNTIME) do
    r[f] = 0
    r.saved[f] = 0
  end
  for i = 1, #v, 2 do
    local f, x = v[i], v[i + 1]
    r.raw[f] = x
    if NOT_NUMERIC[f] then
      r[f] = x
    else
      local n = tonumber(x) or 0
      r[f] = n
      r.saved[f] = n
    end
  end
  return r
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

-- s: p prequeue (place still given by the lottery rank), w waiting, a admitted, x abandoned,
--    c completed, e expired, r revoked
-- pos: place (0 while it is the lottery rank not yet looked up); n: pre-queue arrival number;
-- sid/exp/at: session id, its expiry and the admission time (ms), once admitted
local function get_fan(fanId)
  local raw = redis.call('HGET', K_FANS, fanId)
  if not raw then return nil end
  local s, pos, n, sid, exp, at = string.match(raw, '^(%a)|(%d+)|(%d+)|([^|]*)|(%d+)|(%d+)$')
  return { s = s, pos = tonumber(pos), n = tonumber(n), sid = sid, exp = tonumber(exp),
    at = tonumber(at) }
end

local function put_fan(fanId, f)
  redis.call('HSET', K_FANS, fanId,
    f.s .. '|' .. int(f.pos) .. '|' .. int(f.n) .. '|' .. f.sid .. '|' .. int(f.exp) .. '|' .. int(f.at))
end

local function pre_member(r, fanId)
  return redis.sha1hex(r.seed .. ':' .. fanId) .. fanId
end

local function place_of(r, fanId, f)
  if f.pos > 0 then return f.pos end
  if r.openedAt == 0 then return 0 end
  return redis.call('ZRANK', K_PRE, pre_member(r, fanId)) + 1
end

local function live_sessions(now)
  return redis.call('ZCOUNT', K_ACTIVE, '(' .. int(now), '+inf')
end

-- A place is kept by polling: the last join/poll, or the draw for the pre-queue, whichever is later.
local function is_stale(r, seenAt, now)
  return math.max(seenAt, r.openedAt) < now - r.abandonSeconds * 1000
end

local function room_state(r)
  if r.closed ~= 0 then return 'closed' end
  if r.openedAt == 0 then return 'prequeue' end
  if r.paused ~= 0 or r.admitPerSecond <= 0 then return 'paused' end
  return 'open'
end

-- Admissions per second a waiting fan can expect: the operator's rate while there is room;
-- while the room is full, the rate sessions actually ended at over the last window.
local function effective_rate(r, live)
  if room_state(r) ~= 'open' then return 0 end
  if live >= r.maxActive then
    if r.lastRate > 0 then return math.min(r.admitPerSecond, r.lastRate) end
    if r.maxActive <= 0 then return 0 end
    return math.min(r.admitPerSecond, r.maxActive / r.sessionSeconds)
  end
  return r.admitPerSecond
end

local function waiting_count(r)
  if r.openedAt == 0 then return redis.call('ZCARD', K_PRE) end
  return r.tail - r.served - redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '+inf')
end

local function abandon(r, fanId, f)
  redis.call('ZREM', K_SEEN, fanId)
  if f and (f.s == 'p' or f.s == 'w') then
    local pos = place_of(r, fanId, f)
    f.s = 'x'
    f.pos = pos
    put_fan(fanId, f)
    if pos > r.served then redis.call('ZADD', K_GONE, int(pos), int(pos)) end
    if pos > r.preCount then redis.call('ZREM', K_FIFO, fanId) end
    r.abandoned = r.abandoned + 1
  end
end

local function admit(r, fanId, f, now)
  r.sessSeq = r.sessSeq + 1
  -- unique per configured room (the commitment prefix) and per admission (the counter)
  local sid = string.sub(r.commitment, 1, 8) .. '.' .. int(r.sessSeq)
  local exp = now + r.sessionSeconds * 1000
  redis.call('ZADD', K_ACTIVE, int(exp), sid)
  redis.call('HSET', K_SESSIONS, sid, fanId)
  redis.call('ZREM', K_SEEN, fanId)
  f.s = 'a'
  f.sid = sid
  f.exp = exp
  f.at = now
  put_fan(fanId, f)
  r.admitted = r.admitted + 1
  r.credit = r.credit - 1
end

-- The cursor reached place `pos`, held by fanId: admit the fan if still polling, else skip the
-- place. A fan who left and came back holds a later place; the old one is simply passed over.
local function reach(r, fanId, pos, now, fromPre)
  local f = get_fan(fanId)
  if not f then return 0 end
  if not ((fromPre and f.s == 'p') or (f.s == 'w' and f.pos == pos)) then return 0 end
  f.pos = pos
  local seenAt = tonumber(redis.call('ZSCORE', K_SEEN, fanId)) or 0
  if is_stale(r, seenAt, now) then
    abandon(r, fanId, f)
    return 0
  end
  admit(r, fanId, f, now)
  return 1
end

-- The draw: the pre-queue is already in lottery order (ZSET by hash), so drawing is O(1):
-- freeze it and start numbering later arrivals after it.
local function open_if_due(r, now)
  if r.openedAt > 0 or now < r.onSaleAt then return end
  r.openedAt = r.onSaleAt
  r.preCount = redis.call('ZCARD', K_PRE)
  r.tail = r.preCount
  r.served = 0
  r.credit = 0
  r.accruedAt = r.openedAt
  r.winStart = r.openedAt
  r.winCount = 0
end

local function expire_sessions(r, now)
  local due = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', int(now), 'LIMIT', 0, MAX_EXPIRE)
  for _, sid in ipairs(due) do
    redis.call('ZREM', K_ACTIVE, sid)
    r.expired = r.expired + 1
    local fanId = redis.call('HGET', K_SESSIONS, sid)
    if fanId then
      local f = get_fan(fanId)
      if f and f.s == 'a' and f.sid == sid then
        f.s = 'e'
        put_fan(fanId, f)
      end
    end
  end
end

local function sweep_abandoned(r, now)
  local cutoff = now - r.abandonSeconds * 1000
  if cutoff <= r.openedAt then return end
  local stale = redis.call('ZRANGEBYSCORE', K_SEEN, '-inf', '(' .. int(cutoff), 'LIMIT', 0, MAX_SWEEP)
  for _, fanId in ipairs(stale) do
    abandon(r, fanId, get_fan(fanId))
  end
end

-- Budget: admitPerSecond accrues over elapsed Redis time, only while the room is open and not
-- paused. Settings changes call tick() first, so time before a change accrues at the old rate.
local function accrue(r, now)
  if now <= r.accruedAt then return end
  if room_state(r) == 'open' then
    r.credit = r.credit + (now - r.accruedAt) * r.admitPerSecond / 1000
  end
  r.accruedAt = now
end

local function serve(r, now)
  if room_state(r) ~= 'open' then return 0 end
  local free = r.maxActive - live_sessions(now)
  local steps, admitted = 0, 0
  local stop
  while true do
    if r.served >= r.tail then stop = 'empty' break end
    if admitted >= free then stop = 'full' break end
    if r.credit < 1 then stop = 'budget' break end
    if steps >= MAX_STEPS then stop = 'bound' break end
    local want = math.min(math.floor(r.credit), free - admitted) + 16
    want = math.min(want, MAX_STEPS - steps)
    if r.served < r.preCount then
      want = math.min(want, r.preCount - r.served)
      local members = redis.call('ZRANGE', K_PRE, r.served, r.served + want - 1)
      if #members == 0 then r.served = r.preCount end
      for _, m in ipairs(members) do
        if admitted >= free or r.credit < 1 then break end
        r.served = r.served + 1
        steps = steps + 1
        admitted = admitted + reach(r, string.sub(m, 41), r.served, now, true)
      end
    else
      local rows = redis.call('ZRANGEBYSCORE', K_FIFO, '(' .. int(r.served), '+inf',
        'WITHSCORES', 'LIMIT', 0, want)
      if #rows == 0 then r.served = r.tail end
      for i = 1, #rows, 2 do
        if admitted >= free or r.credit < 1 then break end
        local fanId, pos = rows[i], tonumber(rows[i + 1])
        r.served = pos
        steps = steps + 1
        redis.call('ZREM', K_FIFO, fanId)
        admitted = admitted + reach(r, fanId, pos, now, false)
      end
    end
  end
  -- Budget is not banked while it cannot be used: an empty line keeps at most one admission
  -- (so a lone arrival gets in at once), a full room at most one second of admissions.
  if stop == 'empty' and r.credit > 1 then r.credit = 1 end
  if stop == 'full' then
    local cap = math.max(1, r.admitPerSecond)
    if r.credit > cap then r.credit = cap end
  end
  r.winCount = r.winCount + admitted
  if now - r.winStart >= RATE_WINDOW_MS then
    r.lastRate = r.winCount * 1000 / (now - r.winStart)
    r.winStart = now
    r.winCount = 0
  end
  return admitted
end

-- Vacated places the cursor has passed are no longer needed (every count reads only the part
-- ahead of the cursor); dropped a bounded number per call.
local function forget_passed(r)
  local behind = redis.call('ZCOUNT', K_GONE, '-inf', int(r.served))
  if behind > 0 then
    redis.call('ZREMRANGEBYRANK', K_GONE, 0, math.min(behind, MAX_STEPS) - 1)
  end
end

local function tick(r, now)
  open_if_due(r, now)
  if r.openedAt == 0 then return end
  expire_sessions(r, now)
  sweep_abandoned(r, now)
  accrue(r, now)
  serve(r, now)
  forget_passed(r)
end

-- A fan's own record, brought up to date before it is shown: a session past its expiry has
-- ended; a place not polled for abandonSeconds is lost; a lottery place is looked up once.
local function settle_fan(r, fanId, f, now)
  if f.s == 'a' and f.exp <= now then
    if redis.call('ZREM', K_ACTIVE, f.sid) == 1 then r.expired = r.expired + 1 end
    f.s = 'e'
    put_fan(fanId, f)
  elseif (f.s == 'p' or f.s == 'w') and r.openedAt > 0 then
    local seenAt = tonumber(redis.call('ZSCORE', K_SEEN, fanId)) or 0
    if is_stale(r, seenAt, now) then
      abandon(r, fanId, f)
    elseif f.s == 'p' then
      f.pos = place_of(r, fanId, f)
      f.s = 'w'
      put_fan(fanId, f)
    end
  end
end

local function fan_view(r, fanId, f, now)
  local status = STATE_NAMES[f.s]
  local position, ahead, provisional = f.pos, 0, 0
  if f.s == 'p' and r.openedAt == 0 then
    -- before the draw only the arrival number is known; everyone else in the pre-queue may
    -- end up ahead
    position = f.n
    provisional = 1
    ahead = redis.call('ZCARD', K_PRE) - 1
  elseif f.s == 'p' or f.s == 'w' then
    status = 'waiting'
    position = place_of(r, fanId, f)
    ahead = position - r.served - 1
      - redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '(' .. int(position))
    if ahead < 0 then ahead = 0 end
  end
  local live = live_sessions(now)
  return { 'status', status, 'position', int(position), 'provisional', int(provisional),
    'ahead', int(ahead), 'sessionId', f.sid, 'admittedAt', int(f.at), 'expiresAt', int(f.exp),
    'now', int(now), 'onSaleAt', int(r.onSaleAt), 'roomState', room_state(r),
    'rate', dec(effective_rate(r, live)), 'admitPerSecond', r.raw.admitPerSecond,
    'abandonSeconds', int(r.abandonSeconds), 'epoch', r.epoch }
end

local function snapshot(r, now)
  local live = live_sessions(now)
  local seed = ''
  if r.openedAt > 0 then seed = r.seed end
  return { 'now', int(now), 'state', room_state(r), 'onSaleAt', int(r.onSaleAt),
    'openedAt', int(r.openedAt), 'admitPerSecond', r.raw.admitPerSecond,
    'maxActive', int(r.maxActive), 'sessionSeconds', int(r.sessionSeconds),
    'abandonSeconds', int(r.abandonSeconds), 'paused', int(r.paused), 'closed', int(r.closed),
    'commitment', r.commitment, 'seed', seed, 'waiting', int(waiting_count(r)),
    'active', int(live), 'rate', dec(effective_rate(r, live)), 'joined', int(r.joined),
    'admitted', int(r.admitted), 'abandoned', int(r.abandoned), 'completed', int(r.completed),
    'expired', int(r.expired), 'revoked', int(r.revoked), 'preCount', int(r.preCount),
    'tail', int(r.tail), 'served', int(r.served), 'epoch', r.epoch }
end

local function append(list, ...)
  for _, v in ipairs({ ... }) do list[#list + 1] = v end
  return list
end
