--[[
  The heartbeats of one fan shard (src/waiting-room/fan-shards.ts): when each fan of the shard
  still in line last joined or polled, on the clock of the shard's own master. One key, so a
  caller sends each shard its part of a batch in one call, pipelined over the shards (and, on a
  cluster, over the masters). Used by a room whose `fanShards` is set (its `wr:{evt:E}:seen` stays
  empty); see docs/redis-cluster.md "One event over many masters".

  KEYS[1]  wr:{evt:E:s<k>.<salt>}:beats   ZSET fanId -> last join or poll (ms)
  ARGV[1]  mode:
    'join'    ARGV[2..] fan ids placed (or given back) by a join: recorded as seen now, added when
              absent. Written before the places, so a place never exists without its beat. Returns
              how long ago each one's previous beat was, so a rejoin can tell a place that lapsed.
    'keep'    ARGV[2..] fan ids that polled: recorded as seen now when still present (ZADD XX GT:
              a beat never re-adds a place the sweep removed, nor moves one back); the absent are
              returned, so the caller asks Redis about them next time.
    'poll'    ARGV[2] one fan id whose poll Redis answers (status-10.lua): recorded as seen now
              (added when absent, never moved back); returns how long ago its beat before this one
              was (ms, this master's clock), so the line's script can tell a place lapsed meanwhile.
    'look'    ARGV[2] how recent (ms) a beat must be, ARGV[3..] fan ids a gateway did not know, looked
              up (line-view.ts): each whose beat is that recent is recorded as seen now (ZADD XX GT)
              and returned; the others are left as they are (their polls go to Redis).
    'stale'   ARGV[2] abandon time (ms), ARGV[3] the clock's start (ms: the draw; nobody is stale
              before it plus the abandon time), ARGV[4] at most this many: the fans whose last beat
              is older than now - abandon time, with their beats, oldest first.
    'forget'  ARGV[2..] pairs fanId, beat: each removed only while its beat is still that one (a
              fan who polled or rejoined since the sweep read it keeps the new beat).

  Returns
    join    { now, age of each fan's previous beat (ms) or '' when it had none, in ARGV order }
    keep    { now, missing fan id, ... }
    poll    { now, age of the previous beat (ms) or '' when there was none }
    look    { now, fan id found, ... }
    stale   { now, fanId, beat, fanId, beat, ... }
    forget  { now, removed }
]]
--- @include "now-ms"
--- @include "keep-beats"

local now = now_ms()
local mode = ARGV[1]

-- The time goes to ZADD as text, formatted once: redis.call formats a Lua number with %.17g, once
-- per fan.
local nowText = string.format('%d', now)
if mode == 'join' then
  if #ARGV < 2 then return { now } end
  local ages, sent = { now }, #ARGV - 1
  -- ZADD NX first: it counts the fans it added, and when that is every fan sent (a crowd of new
  -- fans, the usual case) nobody had a beat and no ZMSCORE is needed (ZMSCORE was half of this
  -- call's instructions a fan: bench:redis-instructions).
  local args = { 'NX' }
  for i = 2, #ARGV do
    args[2 * i - 2] = nowText
    args[2 * i - 1] = ARGV[i]
  end
  if redis.call('ZADD', KEYS[1], unpack(args)) == sent then
    for i = 2, #ARGV do ages[i] = '' end
    return ages
  end
  -- Some fans had a beat, which NX left as it was; the others now have this one. A beat of this
  -- very millisecond reads as none: either way the place has not lapsed, which is all a join's age
  -- tells (join-batch-n.lua). The fans with an older beat are recorded as seen now (GT: a beat
  -- ahead of this clock, after a failover, is never moved back).
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 2))
  local older = { 'GT' }
  for i = 2, #ARGV do
    local score = tonumber(scores[i - 1])
    if score and score ~= now then
      ages[i] = string.format('%d', math.max(0, now - score))
      older[#older + 1] = nowText
      older[#older + 1] = ARGV[i]
    else
      ages[i] = ''
    end
  end
  if #older > 1 then redis.call('ZADD', KEYS[1], unpack(older)) end
  return ages
end
if mode == 'keep' then
  if #ARGV < 2 then return { now } end
  return keep_beats(KEYS[1], nowText, { now }, 2)
end
if mode == 'look' then
  local found = { now }
  if #ARGV < 3 then return found end
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 3))
  local recent = now - tonumber(ARGV[2])
  local args = { 'XX', 'GT' }
  for i = 3, #ARGV do
    local score = tonumber(scores[i - 2])
    if score and score > recent then
      found[#found + 1] = ARGV[i]
      args[#args + 1] = nowText
      args[#args + 1] = ARGV[i]
    end
  end
  if #args > 2 then redis.call('ZADD', KEYS[1], unpack(args)) end
  return found
end
if mode == 'poll' then
  local before = redis.call('ZSCORE', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[1], 'GT', nowText, ARGV[2])
  if not before then return { now, '' } end
  return { now, string.format('%d', math.max(0, now - tonumber(before))) }
end

if mode == 'stale' then
  local abandonMs, startMs, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local cutoff = now - abandonMs
  if cutoff <= startMs then return { now } end
  local rows = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', cutoff), 'WITHSCORES',
    'LIMIT', 0, limit)
  local out = { now }
  for i = 1, #rows do out[#out + 1] = rows[i] end
  return out
end

if mode == 'forget' then
  local removed = 0
  for i = 2, #ARGV - 1, 2 do
    local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
    if score and tonumber(score) == tonumber(ARGV[i + 1]) then
      removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
    end
  end
  return { now, removed }
end

return redis.error_reply('beats: unknown mode ' .. tostring(mode))
