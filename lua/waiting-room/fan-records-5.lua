--[[
  A fan shard's half of the line's records (issue 28 steps 2 and 3): the records, the pre-queue
  and the beats of the fans whose shard this is, on one slot, so a record and its beat are
  checked and written in one call. docs/redis-cluster.md "Steps 2 and 3, call by call" is the
  protocol; each mode below names its step there. A room created with WAITING_ROOM_CLAIMS=shards
  calls it (room field `claims` 2), and test/waiting-room/fan-records.test.ts holds it to the
  protocol.

  KEYS[1]  wr:{<tag>}:beats   ZSET fanId -> last join or poll (ms, this master's clock): step 1's
  KEYS[2]  wr:{<tag>}:fans    HASH fanId -> record "s|pos|n|sid|exp|at" (includes/fans.lua's text)
  KEYS[3]  wr:{<tag>}:pre     ZSET the shard's pre-queued fans: score 0, then the drawn place
  KEYS[4]  wr:{<tag>}:given   ZSET places given up here and not yet told to the event's slot,
                              scored with the place: member 'x:<place>' for a fan given up (the
                              room counts it abandoned), 'v:<place>' for a reservation not taken
                              (the room counted it joined: taken back), '<place>' for another
                              place vacated (a revoked fan's). The sweep's `gone` call
                              carries them and then acknowledges them ('ack'), so a gateway dying
                              in between loses none
  KEYS[5]  wr:{<tag>}:frozen  STRING set by the draw: the shard's pre-queue takes nobody more

  The clock of a verdict: `abandonMs` and `startMs` come from the event's slot (the room's
  abandonSeconds, and max(openedAt, drawnAt) once the line is drawn; '' or 0 while the draw is
  pending, when no place lapses), compared with this master's clock, as beats-1.lua 'stale' does.

  ARGV[1] mode:
    'join'     ARGV[2] abandonMs, ARGV[3] startMs, ARGV[4] 'w' places or 'p' arrival numbers, then
               pairs: fanId, the place or the arrival number the event's slot reserved for it
               (step 1 of the protocol). Per fan:
                 no record: the reservation is its record ('new'), with its beat, and a pre-queued
                   fan enters `pre`; but on a frozen shard a pre-queued reservation writes nothing
                   ('frozen': the caller reserves again, after the close)
                 waiting or pre-queued, not lapsed: kept ('again'), its beat written (a repeat join
                   is a poll)
                 lapsed, or ended (x abandoned, e expired, c completed): replaced by the
                   reservation ('rejoin'); a lapsed waiting place goes to `given`
                 admitted (a): kept ('admitted': the event's slot knows whether its session
                   lives; the caller then writes the reservation by 'cas' when it ended, or
                   'vacate's it)
                 revoked (r): kept ('revoked')
               A reserved place not taken ('again', 'revoked') goes to `given`. A fan twice in one
               call: the second finds the first's record.
    'poll'     ARGV[2] abandonMs, ARGV[3] startMs, ARGV[4] fanId (step 2): the record settled as a
               poll sees it (a lapsed place given up: x, its place to `given`; a pre-queued fan,
               once drawn, waiting at its drawn place), its beat written when it is in line
    'cas'      ARGV[2] fanId, ARGV[3] the record read, ARGV[4] the record to write: written only
               while the record is still the one read (steps 2, 4); a record out of line (neither
               waiting nor pre-queued) drops the fan's beat
    'revoke'   ARGV[2] fanId (step 5): the record to r whatever it was (written when absent), its
               beat dropped, the place of a fan in line to `given`
    'vacate'   ARGV[2..] places reserved and not taken (an admitted fan's join): to `given`
    'give-up'  ARGV[2] abandonMs, ARGV[3] startMs, then the fan ids 'stale' read (step 3): each
               fan whose beat, as it is now, lapsed and whose record is waiting or pre-queued is
               given up (x), its beat dropped, its place to `given` (a beat kept or a rejoin since
               the read is younger: spared); a fan no longer in line has its beat dropped
    'given'    ARGV[2] at most this many: the members of `given`, lowest place first
    'ack'      ARGV[2..] members the event's slot took: removed from `given`
    'freeze'   (step 6) the shard's pre-queue takes nobody more
    'members'  ARGV[2] from, ARGV[3] count: the pre-queued fan ids, in byte order (the draw pages them)
    'place'    ARGV[2..] pairs fanId, drawn place: written into `pre` for fans there (ZADD XX)
    'look'     ARGV[2] how recent (ms) a beat must be, ARGV[3] '1' once the line is drawn, ARGV[4..]
               fan ids a gateway did not know (the line view's lookups): a recent beat refreshed
               to now (ZADD XX GT), and each fan's record and drawn place read, in one call

  Returns { now, ... }:
    join     { now } alone when every fan was new (each took its reservation: a crowd's call);
             else per fan, in ARGV order: 1 for a new fan (its reservation is its record), else
             { outcome, the record now, the previous beat's age (ms; '' none), the place given up
             by a rejoin (0 none) }
    poll     the record ('' none), the previous beat's age ('' none)
    cas      1, or 0 and the record now ('' none)
    revoke   the record before ('' none)
    give-up  the places given up
    given    members       ack  removed        vacate  places added   freeze  1 newly frozen, 0 already
    members  fan ids       place  places changed
    look     per fan, in ARGV order: 1 when its beat was recent (refreshed) else 0, its record
             ('' none), its drawn place ('' none, or not drawn)
]]
--- @include "now-ms"
--- @include "shard-record"

local now = now_ms()
local nowText = string.format('%d', now)
local mode = ARGV[1]

if mode == 'join' then
  local abandonMs, startMs, kind = tonumber(ARGV[2]), tonumber(ARGV[3]) or 0, ARGV[4]
  local out = { now }
  local n = (#ARGV - 4) / 2
  if n < 1 then return out end
  local frozen = kind == 'p' and redis.call('EXISTS', K_FROZEN) == 1
  -- Every fan's record read at once, and every write of the call made at once (one HSET, one ZADD
  -- of beats, of pre-queue members, of places given): a command a fan was most of this call's cost
  -- (bench:redis-instructions).
  local ids = {}
  for k = 1, n do ids[k] = ARGV[3 + 2 * k] end
  local raws = redis.call('HMGET', K_FANS, unpack(ids))
  -- A crowd of new fans, the usual case: nobody has a record, nobody twice, the shard not frozen.
  -- Their reservations are their records and their beats are now: the answer is `now` alone.
  local fresh = not frozen
  if fresh then
    local seen = {}
    for k = 1, n do
      if raws[k] or seen[ids[k]] then
        fresh = false
        break
      end
      seen[ids[k]] = true
    end
  end
  if fresh then
    local records, beats = {}, { 'GT' }
    local prefix, suffix = 'w|', '|0||0|0'
    if kind == 'p' then prefix, suffix = 'p|0|', '||0|0' end
    for k = 1, n do
      local fanId = ids[k]
      records[2 * k - 1], records[2 * k] = fanId, prefix .. ARGV[4 + 2 * k] .. suffix
      beats[2 * k], beats[2 * k + 1] = nowText, fanId
    end
    redis.call('HSET', K_FANS, unpack(records))
    redis.call('ZADD', K_BEATS, unpack(beats))
    if kind == 'p' then
      local members = {}
      for k = 1, n do members[2 * k - 1], members[2 * k] = '0', ids[k] end
      redis.call('ZADD', K_PRE, unpack(members))
    end
    return out
  end
  -- Otherwise fan by fan, `rec` and `beatOf` following the call's own writes, so a fan twice in
  -- one call finds its first reservation.
  local scores = redis.call('ZMSCORE', K_BEATS, unpack(ids))
  local rec, beatOf = {}, {}
  for k, fanId in ipairs(ids) do
    if rec[fanId] == nil then
      rec[fanId] = raws[k] or false
      beatOf[fanId] = tonumber(scores[k]) or false
    end
  end
  local records, beats, members, given = {}, { 'GT' }, {}, {}
  for k, fanId in ipairs(ids) do
    local numberText = ARGV[4 + 2 * k]
    local raw, before = rec[fanId], beatOf[fanId]
    local age = before and text(math.max(0, now - before)) or ''
    local outcome, old = nil, 0
    local f = raw and unpack_record(raw)
    if kind == 'p' and frozen and (not f or not in_line(f)) then
      outcome = 'frozen'
    elseif not f then
      outcome = 'new'
    elseif in_line(f) and not lapsed(before or 0, abandonMs, startMs, now) then
      outcome = 'again'
    elseif in_line(f) then
      outcome = 'rejoin'
      old = give_up(fanId, f)
    elseif f.s == 'a' then
      outcome = 'admitted'
    elseif f.s == 'r' then
      outcome = 'revoked'
    else
      outcome = 'rejoin'
    end
    if outcome == 'new' or outcome == 'rejoin' then
      if kind == 'p' then raw = 'p|0|' .. numberText .. '||0|0' else raw = 'w|' .. numberText .. '|0||0|0' end
      records[#records + 1] = fanId
      records[#records + 1] = raw
      rec[fanId] = raw
      if kind == 'p' then
        members[#members + 1] = '0'
        members[#members + 1] = fanId
      end
    elseif kind == 'w' and (outcome == 'again' or outcome == 'revoked') then
      given[#given + 1] = numberText
      given[#given + 1] = 'v:' .. numberText
    end
    if outcome == 'new' or outcome == 'rejoin' or outcome == 'again' then
      beats[#beats + 1] = nowText
      beats[#beats + 1] = fanId
      beatOf[fanId] = now
    end
    -- a new fan's answer is 1 (its reservation, which the caller knows, is its record)
    if outcome == 'new' then out[k + 1] = 1 else out[k + 1] = { outcome, raw or '', age, old } end
  end
  if #records > 0 then redis.call('HSET', K_FANS, unpack(records)) end
  if #beats > 1 then redis.call('ZADD', K_BEATS, unpack(beats)) end
  if #members > 0 then redis.call('ZADD', K_PRE, unpack(members)) end
  if #given > 0 then redis.call('ZADD', K_GIVEN, unpack(given)) end
  return out
end

if mode == 'poll' then
  local abandonMs, startMs, fanId = tonumber(ARGV[2]), tonumber(ARGV[3]) or 0, ARGV[4]
  local raw = redis.call('HGET', K_FANS, fanId)
  if not raw then return { now, '', '' } end
  local f = unpack_record(raw)
  local before = redis.call('ZSCORE', K_BEATS, fanId)
  local age = before and text(math.max(0, now - tonumber(before))) or ''
  if in_line(f) then
    if lapsed(tonumber(before), abandonMs, startMs, now) then
      give_up(fanId, f)
    else
      redis.call('ZADD', K_BEATS, 'GT', nowText, fanId)
      if f.s == 'p' and startMs > 0 then
        local place = place_of(fanId, f)
        if place > 0 then
          f.s = 'w'
          f.pos = place
          redis.call('HSET', K_FANS, fanId, pack_record(f))
        end
      end
    end
  end
  return { now, pack_record(f), age }
end

if mode == 'cas' then
  local fanId, old, new = ARGV[2], ARGV[3], ARGV[4]
  local raw = redis.call('HGET', K_FANS, fanId)
  if (raw or '') ~= old then return { now, 0, raw or '' } end
  redis.call('HSET', K_FANS, fanId, new)
  if not in_line(unpack_record(new)) then redis.call('ZREM', K_BEATS, fanId) end
  return { now, 1 }
end

if mode == 'revoke' then
  local fanId = ARGV[2]
  local raw = redis.call('HGET', K_FANS, fanId)
  local f = raw and unpack_record(raw) or { s = 'r', pos = 0, n = 0, sid = '', exp = '0', at = '0' }
  if raw and f.s ~= 'r' then
    if in_line(f) then
      f.pos = place_of(fanId, f)
      give(f.pos)
    end
    f.s = 'r'
  end
  redis.call('HSET', K_FANS, fanId, pack_record(f))
  redis.call('ZREM', K_BEATS, fanId)
  return { now, raw or '' }
end

if mode == 'give-up' then
  local abandonMs, startMs = tonumber(ARGV[2]), tonumber(ARGV[3]) or 0
  local out = { now }
  for i = 4, #ARGV do
    local fanId = ARGV[i]
    local score = tonumber(redis.call('ZSCORE', K_BEATS, fanId))
    if score and lapsed(score, abandonMs, startMs, now) then
      local raw = redis.call('HGET', K_FANS, fanId)
      local f = raw and unpack_record(raw)
      if f and in_line(f) then
        local place = give_up(fanId, f)
        if place > 0 then out[#out + 1] = place end
      else
        redis.call('ZREM', K_BEATS, fanId)
      end
    end
  end
  return out
end

if mode == 'given' then
  local out = { now }
  for _, m in ipairs(redis.call('ZRANGE', K_GIVEN, 0, tonumber(ARGV[2]) - 1)) do out[#out + 1] = m end
  return out
end

if mode == 'ack' then
  if #ARGV < 2 then return { now, 0 } end
  return { now, redis.call('ZREM', K_GIVEN, unpack(ARGV, 2)) }
end

if mode == 'vacate' then
  local added = 0
  for i = 2, #ARGV do
    local place = tonumber(ARGV[i]) or 0
    if place > 0 then added = added + redis.call('ZADD', K_GIVEN, place, 'v:' .. text(place)) end
  end
  return { now, added }
end

if mode == 'freeze' then
  return { now, redis.call('SET', K_FROZEN, nowText, 'NX') and 1 or 0 }
end

if mode == 'members' then
  local from, count = tonumber(ARGV[2]), tonumber(ARGV[3])
  local out = { now }
  for _, fanId in ipairs(redis.call('ZRANGE', K_PRE, from, from + count - 1)) do out[#out + 1] = fanId end
  return out
end

if mode == 'look' then
  -- A line view's lookups (line-view.ts), in one call a shard: each fan's beat checked (recent:
  -- refreshed to now, as beats-1.lua 'look' does) with its record and, once drawn, its drawn place.
  local out = { now }
  if #ARGV < 4 then return out end
  local recent = now - tonumber(ARGV[2])
  local scores = redis.call('ZMSCORE', K_BEATS, unpack(ARGV, 4))
  local records = redis.call('HMGET', K_FANS, unpack(ARGV, 4))
  local places = ARGV[3] == '1' and redis.call('ZMSCORE', K_PRE, unpack(ARGV, 4)) or {}
  local args = { 'XX', 'GT' }
  for i = 4, #ARGV do
    local j = i - 3
    local score = tonumber(scores[j])
    local found = score ~= nil and score > recent
    if found then
      args[#args + 1] = nowText
      args[#args + 1] = ARGV[i]
    end
    out[#out + 1] = found and 1 or 0
    out[#out + 1] = records[j] or ''
    out[#out + 1] = places[j] or ''
  end
  if #args > 2 then redis.call('ZADD', K_BEATS, unpack(args)) end
  return out
end

if mode == 'place' then
  local args = { 'XX', 'CH' }
  for i = 2, #ARGV - 1, 2 do
    args[#args + 1] = ARGV[i + 1]
    args[#args + 1] = ARGV[i]
  end
  if #args == 2 then return { now, 0 } end
  return { now, redis.call('ZADD', K_PRE, unpack(args)) }
end

return redis.error_reply('fan-records: unknown mode ' .. tostring(mode))
