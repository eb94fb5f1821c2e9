--[[
  The common join, for a batch of fans at once: the joins one gateway process received for one
  event while its previous batch was in Redis (src/waiting-room/join-batch.ts). A fan new to a line
  that is moving gets a place here, without the line's tick, and a repeat join of a fan whose place
  stands (waiting and polled, or pre-queued before the close) gets it back; every other join is
  join-9.lua's, which the caller hands it to. What is the same for every fan is done once per batch: the room read
  (HMGET of the fields it needs, not the whole room), one HINCRBY for all the places, one write each
  of the fans' records, places and heartbeats, one take per client IP's bucket. So a join costs a
  few variadic arguments, not a dozen commands; nothing grows with the line.

  A fan goes to join-9.lua ({ 'join' }) when
    the fan already has a record that needs the tick or settling (admitted, a drawn place not yet
    looked up, stale, lost, ended, revoked: a rejoin, a revoked fan's refusal),
    or the same fan id came twice in this batch (the second is a repeat join),
    the pre-queue is due to close (Redis time at or past onSaleAt, not yet closed),
    the line is empty (an arrival at its head may be admitted in the same call).

  Places are given in the batch's order, which is the order the process received the joins: the
  line stays first come, first served.

  KEYS[1..8]   the line's keys (includes/room.lua)
  KEYS[9..8+m] the client IPs' join buckets of this batch (src/waiting-room/keys.ts limitKey), each
               once, every one named by at least one fan
  ARGV[1]      n, the number of fans
  ARGV[2]      m, the number of buckets
  ARGV[3]      w, the arguments a fan (1, 2 or 4): the fewest that carry this batch (below)
  ARGV[4]      s (nLimits), the number of distinct per-IP limits among them (1 when m > 0, as a rule: the
               gateway's setting)
  ARGV[5..4+2s] each limit's rate (tokens/s, > 0) and burst
  then         when s > 1, m: each bucket's limit (1..s), in KEYS order; none when s <= 1 (all the
               first). A limit goes once a batch, not once a fan or once a bucket
  then         w per fan, in arrival order (fan i's from ARGV[F0 + w(i - 1) + 1], F0 the count
               of the arguments before):
                 fanId,
                 (w >= 2) its IP bucket (an index into KEYS counted from KEYS[9] as 1; 0: no per-IP
                 limit; w = 1: none for any fan of the batch),
                 (w = 4) bits of the proof of work the gateway checked (0: none), and '1' when the
                 gateway checked an operator's invite (w < 4: neither for any fan of the batch)
               An argument costs the call ~650 instructions (a '0' as much as a fan id, nearly:
               bench:redis-instructions), so a batch sends none that say nothing
  then         the room's epoch and its fan shards, as the caller knows them (0: none): with shards,
               the caller wrote every fan's beat to the room's shards before this call (beats-1.lua
               'join'), and this script writes no heartbeat. A room with another count, or with
               shards and another epoch (created again since), answers every fan { 'reshard', K }
               and touches nothing (not even the limits): the caller reads the room again and sends
               the fan again
  then         '1' when the caller needs the fan view, '0' when it can answer a new waiting place
               from its own cached view of the line (src/waiting-room/line-view.ts placeOfNewFan)
  then         with shards, two for each fan whose shard found a previous beat (as a rule few: a
               new fan has none), in any order: the fan's index in the batch (1..n) and how long ago
               (ms) that beat was, as its shard answered the write. A known fan whose place lapsed
               meanwhile goes to join-9.lua as { 'join', age }, which gives the place up and takes a
               new one. No argument for a fan without one: a crowd of new fans sends none

  The limits are taken first, in arrival order per bucket, so a refused join touches nothing of
  the line (as join-9.lua: a fan handed on to join-9 has its limit taken already). All the buckets
  are read by one MGET and each written by one SET (take_tokens_batch): a crowd joins from as
  many addresses as fans, so a bucket a fan was most of a join's cost on the event's slot.

  Returns { view, reply 1, ..., reply n }. With '0' (the caller's cached view), a batch whose every
  fan is placed new, after the close and the draw, and at least VIEWLESS_SECONDS of admissions behind the
  cursor, gets { 'epoch', <the room's>, 'invites', 0|1, 'viewless', 1 } in place of the view: the
  caller answers each fan from its cache, as it answers their polls, and the script neither reads
  the sessions and vacated places nor builds and sends the view (~66k instructions a call of the
  ~300k a batch costs the event's slot, bench:redis-instructions). Otherwise `view` is the fan view (includes/views.lua fan_view) of
  the first fan placed, plus 'created' 1 and 'invites' (as join-9.lua; empty when nobody was placed): every fan placed in one
  batch sees the same room, so only its position and `ahead` differ, and the script does not build
  and send the 34-field view n times (that was most of its time). Then one reply per fan, in ARGV
  order:
    position (an integer > 0)                placed: the view with this position, `created` 1
                                             and `ahead` derived from the view's (the view is of
                                             the batch's first new place; see the reply loop)
    { position, ahead, 0 }                   given back (a repeat join): the view with these
    { 'limited', 'ip', 'retryAfterMs', ms }  the per-IP limit refused the join
    { 'refused', ... }                       as join-9.lua
    { 'join' }                               join-9.lua decides (the limit already taken)
    -1  unknown event      -3  the room is closed
]]
--- @include "views"
--- @include "token-bucket"

-- A viewless reply (below) only for places at least this many seconds of admissions from the cursor.
local VIEWLESS_SECONDS = 3
-- read a few times a fan: a local, not a global's lookup each time
local ARGV = ARGV
local n, m, PER_FAN, nLimits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
-- fan i's arguments are ARGV[F0 + PER_FAN * (i - 1) + 1 ..]; the epoch, shards and ages follow them
local F0 = 4 + 2 * nLimits + (nLimits > 1 and m or 0)
local TAIL = F0 + n * PER_FAN
local now = now_ms()
-- out[i] is fan i's reply; the view goes in front when the script returns
local out = {}
local function reply(view)
  table.insert(out, 1, view or {})
  return out
end

local FIELDS = { 'onSaleAt', 'openedAt', 'closed', 'paused', 'admitPerSecond', 'maxActive', 'sessionSeconds',
  'abandonSeconds', 'lastRate', 'served', 'tail', 'powBits', 'invites', 'drawn', 'epoch', 'drawnAt', 'fanShards',
  'claims' }
local v = redis.call('HMGET', K_ROOM, unpack(FIELDS))
local epochKnown, shardsKnown = ARGV[TAIL + 1] or '', tonumber(ARGV[TAIL + 2]) or 0
local viewWanted = ARGV[TAIL + 3] ~= '0'
-- fan index -> ms since its previous beat, for the fans that had one
local ageOf = {}
for p = TAIL + 4, #ARGV - 1, 2 do ageOf[tonumber(ARGV[p])] = ARGV[p + 1] end
if v[1] and ((tonumber(v[17]) or 0) ~= shardsKnown or (shardsKnown > 0 and v[15] ~= epochKnown)) then
  for i = 1, n do out[i] = { 'reshard', int(tonumber(v[17]) or 0) } end
  return reply()
end

-- The limits: every bucket read at once and written once, for all of its fans in arrival order.
if m > 0 then
  local bucketOf, counts = {}, {}
  for b = 1, m do counts[b] = 0 end
  for i = 1, n do
    local b = PER_FAN >= 2 and tonumber(ARGV[F0 + PER_FAN * (i - 1) + 2]) or 0
    if b > 0 then
      bucketOf[i] = b
      counts[b] = counts[b] + 1
    end
  end
  local rates, bursts, settingOf = {}, {}, nil
  for k = 1, nLimits do
    rates[k], bursts[k] = tonumber(ARGV[3 + 2 * k]), tonumber(ARGV[4 + 2 * k])
  end
  if nLimits > 1 then
    settingOf = {}
    for b = 1, m do settingOf[b] = tonumber(ARGV[4 + 2 * nLimits + b]) end
  end
  local allowed, retry = take_tokens_batch(KEYS, 8, m, rates, bursts, settingOf, counts, now)
  local refusal = {}
  for i = 1, n do
    local b = bucketOf[i]
    if b then
      if allowed[b] > 0 then
        allowed[b] = allowed[b] - 1
      else
        refusal[b] = refusal[b] or { 'limited', 'ip', 'retryAfterMs', int(retry[b]) }
        out[i] = refusal[b]
      end
    end
  end
end

-- ids: the fans the limits let through, at[j] the index in the batch of ids[j]. A batch of one
-- argument a fan and no bucket (as a rule, a room with fan shards) refuses nobody here: its ids are
-- ARGV's, taken in one table of the right size, and at[j] is j (a table grown one fan at a time is
-- rehashed at every power of two: measurable in a call of 32).
local ids, at
if m == 0 and PER_FAN == 1 then
  ids = { unpack(ARGV, F0 + 1, F0 + n) }
else
  ids, at = {}, {}
  for i = 1, n do
    if not out[i] then
      ids[#ids + 1] = ARGV[F0 + PER_FAN * (i - 1) + 1]
      at[#ids] = i
    end
  end
end

local function answer_all(answer)
  for j = 1, #ids do out[at and at[j] or j] = answer end
  return reply()
end
if #ids == 0 then return reply() end
if not v[1] then return answer_all(-1) end
-- One constructor: the table is made at its size, not rehashed at every power of two as fields
-- are added (FIELDS' order).
local r = {
  onSaleAt = tonumber(v[1]) or 0, openedAt = tonumber(v[2]) or 0, closed = tonumber(v[3]) or 0,
  paused = tonumber(v[4]) or 0, admitPerSecond = tonumber(v[5]) or 0, maxActive = tonumber(v[6]) or 0,
  sessionSeconds = tonumber(v[7]) or 0, abandonSeconds = tonumber(v[8]) or 0, lastRate = tonumber(v[9]) or 0,
  served = tonumber(v[10]) or 0, tail = tonumber(v[11]) or 0, powBits = tonumber(v[12]) or 0,
  invites = tonumber(v[13]) or 0, drawn = tonumber(v[14]) or 0, epoch = v[15] or '',
  drawnAt = tonumber(v[16]) or 0, fanShards = tonumber(v[17]) or 0, rateText = v[5],
  claims = tonumber(v[18]) or 0,
}
if (r.openedAt == 0 and now >= r.onSaleAt) or (r.openedAt > 0 and r.served >= r.tail) then
  return answer_all({ 'join' })
end

-- A fan with a record is answered here when its place stands as it is (a repeat join: a reload, a
-- second tab, a retry), and handed to join-9.lua otherwise; a second join of one fan id in this
-- batch is join-9's too.
local known = redis.call('HMGET', K_FANS, unpack(ids))
local knownIds = {}
for j = 1, #ids do
  if known[j] then knownIds[#knownIds + 1] = ids[j] end
end
local seenAt = {}
if #knownIds > 0 and not sharded(r) then
  local scores = redis.call('ZMSCORE', K_SEEN, unpack(knownIds))
  for j, fanId in ipairs(knownIds) do seenAt[fanId] = tonumber(scores[j]) or 0 end
end
-- The place a known fan holds, answered without the tick: waiting past the cursor and polled
-- within abandonSeconds, or pre-queued while the pre-queue is open. Anything else (admitted, a
-- place to look up after the draw, lost, ended, revoked) needs settle_fan and the tick: join-9.
local function standing(fanId, f, i)
  if f.s == 'p' then return r.openedAt == 0 end
  if f.s ~= 'w' or r.openedAt == 0 or f.pos <= r.served then return false end
  if not sharded(r) then return not is_stale(r, seenAt[fanId], now) end
  -- a sharded room: the beat before this join's, as the shard said
  local age = ageOf[i]
  return age == nil or not is_stale(r, now - tonumber(age), now)
end

local placed, again, seenHere = {}, {}, {}
for j = 1, #ids do
  local fanId, i = ids[j], at and at[j] or j
  local a = F0 + PER_FAN * (i - 1)
  if seenHere[fanId] then
    out[i] = { 'join' }
  elseif known[j] then
    local f = unpack_fan(known[j])
    if standing(fanId, f, i) then
      again[#again + 1] = { i = i, fanId = fanId, f = f }
    elseif sharded(r) then
      out[i] = { 'join', ageOf[i] or '' }
    else
      out[i] = { 'join' }
    end
  elseif r.closed ~= 0 then
    out[i] = -3
  elseif r.powBits > 0 and r.powBits > (PER_FAN >= 4 and tonumber(ARGV[a + 3]) or 0) then
    out[i] = { 'refused', 'pow', 'powBits', int(r.powBits) }
  elseif r.invites ~= 0 and (PER_FAN < 4 or ARGV[a + 4] ~= '1') then
    out[i] = { 'refused', 'invite' }
  else
    placed[#placed + 1] = i
  end
  seenHere[fanId] = true
end
local k = #placed
if k == 0 and #again == 0 then return reply() end

-- The places: one counter step for all, given in arrival order.
local first, order, records, heartbeats = 0, {}, {}, {}
local prequeue = r.openedAt == 0
if k > 0 then
  if prequeue then
    first = redis.call('HINCRBY', K_ROOM, 'preSeq', k) - k
  else
    first = redis.call('HINCRBY', K_ROOM, 'tail', k) - k
  end
end
-- A new fan's record (new_fan_text: one number converted a fan), the lists filled by index. A
-- room with claims keeps no `fifo`: its tick counts places and reads no fan at one (admission.lua).
local nowText, h, shardedRoom = int(now), 0, sharded(r)
local fifo = not prequeue and not claims(r)
for j = 1, k do
  local fanId = ARGV[F0 + PER_FAN * (placed[j] - 1) + 1]
  local place = int(first + j)
  local o = 2 * j - 1
  if prequeue then
    order[o], order[o + 1] = '0', pre_member(r, fanId)
    records[o], records[o + 1] = fanId, new_fan_text('p', place)
  else
    if fifo then order[o], order[o + 1] = place, fanId end
    records[o], records[o + 1] = fanId, new_fan_text('w', place)
  end
  if not shardedRoom then
    heartbeats[o], heartbeats[o + 1] = nowText, fanId
    h = o + 1
  end
end
-- a repeat join counts as the poll that keeps the place (as join-9.lua)
if not shardedRoom then
  for _, g in ipairs(again) do
    heartbeats[h + 1], heartbeats[h + 2] = nowText, g.fanId
    h = h + 2
  end
end
if k > 0 then
  if prequeue then redis.call('ZADD', K_PRE, unpack(order)) elseif fifo then redis.call('ZADD', K_FIFO, unpack(order)) end
  redis.call('HSET', K_FANS, unpack(records))
  redis.call('HINCRBY', K_ROOM, 'joined', k)
end
if h > 0 then redis.call('ZADD', K_SEEN, unpack(heartbeats)) end

-- The caller answers from its cached view: every fan placed new, waiting (after the close) and far
-- enough behind the cursor that the cache answers it (line-view.ts answers a fan whose turn is
-- more than a second of admissions away; this margin is wider, so a view a few refreshes old
-- agrees). The admission rate is the larger of the setting and the one measured.
if not viewWanted and #again == 0 and k > 0 and not prequeue and r.drawn ~= 0
  and first + 1 - r.served > 2 + VIEWLESS_SECONDS * math.max(r.admitPerSecond, r.lastRate) then
  for j = 1, k do out[placed[j]] = first + j end
  return reply({ 'epoch', r.epoch, 'invites', int(r.invites), 'viewless', '1' })
end

-- Every new place is at the back: the vacated places past the cursor are all ahead of it.
local memo = { live = live_sessions(now) }
if r.openedAt == 0 then
  memo.preCard = redis.call('ZCARD', K_PRE)
else
  memo.goneAhead = redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '+inf')
end
-- The view once, of the first fan answered: every fan of one batch sees the same room (the same
-- status: all pre-queued before the close, all waiting after), only position, ahead and created
-- differ.
local viewFan, viewRecord = nil, nil
if k > 0 then
  viewFan = ARGV[F0 + PER_FAN * (placed[1] - 1) + 1]
  viewRecord = { s = prequeue and 'p' or 'w', pos = prequeue and 0 or first + 1, n = prequeue and first + 1 or 0,
    sid = '', exp = 0, at = 0 }
else
  viewFan, viewRecord = again[1].fanId, again[1].f
end
local view = append(fan_view(r, viewFan, viewRecord, now, memo), 'created', '1', 'invites', int(r.invites))
-- A new place's reply is its position alone, a number (the caller tells it from the negative codes
-- and the lists): `ahead` follows from the view, which is of the batch's first new place. Before
-- the close every new place has the view's `ahead` (the pre-queue less the fan); after it a new
-- place is at the back, past every vacated place, so its `ahead` is the view's plus the places
-- between the two. One integer a fan instead of a list of three: turning a list into the reply is
-- most of a fan's share of the script's reply.
for j = 1, k do out[placed[j]] = first + j end
for _, g in ipairs(again) do
  local f = g.f
  if r.openedAt == 0 then
    out[g.i] = { f.n, memo.preCard - 1, 0 }
  else
    local gone = redis.call('ZCOUNT', K_GONE, '(' .. int(r.served), '(' .. int(f.pos))
    out[g.i] = { f.pos, math.max(0, f.pos - r.served - 1 - gone), 0 }
  end
end
return reply(view)
