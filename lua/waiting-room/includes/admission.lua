--[[
  The admission tick: what elapsed Redis time owes the line, settled at the start of every script
  (nothing runs on a timer). The cursor `served` is the last place reached; admitPerSecond
  accrues as `credit` while the room is open, and each admission into a free session spends one.
  Each call does bounded work (the MAX_* limits); whatever is left is carried to the next call.

  Defines  tick(r, now)     the draw when due, expired sessions, abandoned places (none until
                            abandonSeconds after the draw), the budget, admissions, and
                            forgetting vacated places the cursor passed
           serve(r, now)    admissions alone (after a slot was freed or the line grew);
                            returns how many fans it admitted (a room with claims: how many
                            places it offered)
           claim_passed(r, fanId, f, now)  a room with claims: the fan at a place passed takes
                            its offer, or learns the place lost
  Needs    room, prequeue, fans, sessions
  Keys     K_PRE, K_FIFO, K_SEEN, K_GONE (and those of the includes it needs)
]]
--- @include "room"
--- @include "prequeue"
--- @include "fans"
--- @include "sessions"

local MAX_STEPS = 256      -- places the cursor passes (admitted or skipped) per call
local MAX_SWEEP = 128      -- abandoned fans detected per call
local RATE_WINDOW_MS = 10000
-- A sharded room (room.lua sharded): a gateway's line-view call is handed the sweep every
-- SWEEP_EVERY_MS (sweep_due), and nobody is admitted while the last completed sweep is older than
-- SWEEP_LAG_MS once places can be lost: a fan reached is then absent for at most abandonSeconds
-- plus that lag. Kept in step with src/waiting-room/fan-sweep.ts.
local SWEEP_EVERY_MS = 1000
local SWEEP_LAG_MS = 3000
-- A room with claims: an offer is given back this long after abandonSeconds, unclaimed. A fan who
-- polls as advised (every abandonSeconds / 3 at most) claims long before; one who stopped has
-- been given up by a sweep by then (the sweep's lag is within this), which gave the offer back.
local OFFER_GRACE_MS = SWEEP_LAG_MS + 1000

-- Places can be lost (the draw is done and the abandon time since the clock's start has passed),
-- and no sweep completed within SWEEP_LAG_MS.
local function sweep_lagging(r, now)
  if not sharded(r) or r.drawn == 0 or r.openedAt == 0 then return false end
  if now - r.abandonSeconds * 1000 <= math.max(r.openedAt, r.drawnAt) then return false end
  return r.sweptAt < now - SWEEP_LAG_MS
end

-- The caller is handed this room's sweep (at most one caller per SWEEP_EVERY_MS).
local function sweep_due(r, now)
  if not sharded(r) or r.drawn == 0 or r.openedAt == 0 then return false end
  if now - r.sweepAt < SWEEP_EVERY_MS then return false end
  r.sweepAt = now
  return true
end

-- The cursor reached place `pos`, held by fanId: admit the fan if still polling, else skip the
-- place. A fan who left and came back holds a later place; the old one is simply passed over.
local function reach(r, fanId, pos, now, fromPre)
  local f = get_fan(fanId)
  if not f then return 0 end
  if not ((fromPre and f.s == 'p') or (f.s == 'w' and f.pos == pos)) then return 0 end
  f.pos = pos
  -- A sharded room cannot read the beat here (another slot): the sweep has given up every place
  -- stale when it last ran, and serve() admits only while that was within SWEEP_LAG_MS.
  if not sharded(r) then
    local seenAt = tonumber(redis.call('ZSCORE', K_SEEN, fanId)) or 0
    if is_stale(r, seenAt, now) then
      abandon(r, fanId, f)
      return 0
    end
  end
  admit(r, fanId, f, now)
  return 1
end

local function sweep_abandoned(r, now)
  if sharded(r) then return end
  local cutoff = now - r.abandonSeconds * 1000
  -- the clock runs from the draw (fans.lua is_stale): nobody is stale before it, nor just after
  if r.drawn == 0 or cutoff <= math.max(r.openedAt, r.drawnAt) then return end
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

-- A room with claims (room.lua): the cursor passes up to `free` places not vacated, and offers
-- each a session (a member of `active` scored with the time it is given back), spending the
-- credit now; the fans claim them (claim_passed). No fan's record is read: the passing counts
-- places. Returns the places offered and why it stopped.
local function offer_places(r, now, free)
  local steps, offered, stop = 0, 0, nil
  local givenBack = int(now + r.abandonSeconds * 1000 + OFFER_GRACE_MS)
  while true do
    if r.served >= r.tail then stop = 'empty' break end
    if offered >= free then stop = 'full' break end
    if r.credit < 1 then stop = 'budget' break end
    if steps >= MAX_STEPS then stop = 'bound' break end
    if sweep_lagging(r, now) then stop = 'sweep' break end
    if r.served < r.preCount and r.drawn == 0 then stop = 'draw' break end
    local last = math.min(r.tail, r.served + MAX_STEPS - steps)
    local vacated = {}
    for _, p in ipairs(redis.call('ZRANGEBYSCORE', K_GONE, '(' .. int(r.served), int(last))) do
      vacated[tonumber(p)] = true
    end
    local offers = {}
    while r.served < last and offered < free and r.credit >= 1 do
      r.served = r.served + 1
      steps = steps + 1
      if not vacated[r.served] then
        offers[#offers + 1] = givenBack
        offers[#offers + 1] = OFFER .. int(r.served)
        offered = offered + 1
        r.credit = r.credit - 1
      end
    end
    if #offers > 0 then redis.call('ZADD', K_ACTIVE, unpack(offers)) end
  end
  r.offered = r.offered + offered
  return offered, stop
end

local function serve(r, now)
  if room_state(r) ~= 'open' then return 0 end
  local free = r.maxActive - live_sessions(now)
  local steps, admitted = 0, 0
  local stop
  if claims(r) then
    admitted, stop = offer_places(r, now, free)
  end
  while not stop do
    if r.served >= r.tail then stop = 'empty' break end
    if admitted >= free then stop = 'full' break end
    if r.credit < 1 then stop = 'budget' break end
    if steps >= MAX_STEPS then stop = 'bound' break end
    if sweep_lagging(r, now) then stop = 'sweep' break end
    local want = math.min(math.floor(r.credit), free - admitted) + 16
    want = math.min(want, MAX_STEPS - steps)
    if r.served < r.preCount and r.drawn == 0 then stop = 'draw' break end
    if r.served < r.preCount then
      want = math.min(want, r.preCount - r.served)
      local members = redis.call('ZRANGE', K_PRE, r.served, r.served + want - 1)
      if #members == 0 then r.served = r.preCount end
      for _, m in ipairs(members) do
        if admitted >= free or r.credit < 1 then break end
        r.served = r.served + 1
        steps = steps + 1
        admitted = admitted + reach(r, m, r.served, now, true)
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
  -- (so a lone arrival gets in at once), as does a line waiting for its draw (the pre-queue's
  -- places are offered at the rate from the draw on, not a second's worth in one instant: the
  -- draw waits for its beacon, or DRAW_GRACE_MS in a room whose records live on the fan shards);
  -- a full room keeps at most one second of admissions.
  if (stop == 'empty' or stop == 'draw') and r.credit > 1 then r.credit = 1 end
  if stop == 'full' or stop == 'sweep' then
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

-- A room with claims: the fan whose place the cursor passed takes the session offered to it (its
-- poll or join, after settle_fan). An offer no longer there was given back (not claimed within
-- abandonSeconds and OFFER_GRACE_MS): the place is lost, as any place not polled for.
local function claim_passed(r, fanId, f, now)
  if not claims(r) or f.s ~= 'w' or r.openedAt == 0 or f.pos > r.served then return end
  local member = OFFER .. int(f.pos)
  local givenBack = tonumber(redis.call('ZSCORE', K_ACTIVE, member))
  if givenBack and givenBack > now then
    redis.call('ZREM', K_ACTIVE, member)
    r.offered = r.offered - 1
    -- admittedAt is the offer's time (the line's decision), read back from its expiry; an
    -- abandonSeconds changed since moves it, never past now
    admit(r, fanId, f, now, math.min(now, givenBack - r.abandonSeconds * 1000 - OFFER_GRACE_MS))
  else
    abandon(r, fanId, f)
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
