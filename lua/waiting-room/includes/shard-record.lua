--[[
  A fan shard's record helpers (fan-records-5.lua): in an include, so that as a Redis Function they
  are made once at the load, not on every call (the call's body is only its own lines).

  Defines  K_BEATS, K_FANS, K_PRE, K_GIVEN, K_FROZEN    the shard's five keys (fan-records-5.lua)
           text(n)                   an integer as text
           unpack_record(raw), pack_record(f)   includes/fans.lua's record text (exp, at kept as text)
           in_line(f)                waiting or pre-queued
           place_of(fanId, f)        the place a record holds (a pre-queued fan's drawn place, 0 before)
           give(place, abandoned)    a place to tell the event's slot (`abandoned`: a fan given up)
           lapsed(beat, abandonMs, startMs, now)   not polled for the abandon time since the clock's
                                     start (includes/fans.lua is_stale); nobody's before the draw
           give_up(fanId, f)         the record to x at its place, the beat dropped, the place given
  Keys     the five above
]]

local K_BEATS, K_FANS, K_PRE, K_GIVEN, K_FROZEN = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local function text(n)
  return string.format('%d', n)
end

local function unpack_record(raw)
  local s, pos, n, sid, exp, at = string.match(raw, '^(%a)|(%d+)|(%d+)|([^|]*)|(%d+)|(%d+)$')
  return { s = s, pos = tonumber(pos), n = tonumber(n), sid = sid, exp = exp, at = at }
end

local function pack_record(f)
  return f.s .. '|' .. text(f.pos) .. '|' .. text(f.n) .. '|' .. f.sid .. '|' .. f.exp .. '|' .. f.at
end

local function in_line(f)
  return f.s == 'w' or f.s == 'p'
end

local function place_of(fanId, f)
  if f.s == 'p' then return tonumber(redis.call('ZSCORE', K_PRE, fanId)) or 0 end
  return f.pos
end

local function give(place, abandoned)
  if place > 0 then redis.call('ZADD', K_GIVEN, place, abandoned and 'x:' .. text(place) or text(place)) end
end

local function lapsed(beat, abandonMs, startMs, now)
  if startMs <= 0 then return false end
  return math.max(beat or 0, startMs) < now - abandonMs
end

local function give_up(fanId, f)
  f.pos = place_of(fanId, f)
  f.s = 'x'
  redis.call('HSET', K_FANS, fanId, pack_record(f))
  redis.call('ZREM', K_BEATS, fanId)
  give(f.pos, true)
  return f.pos
end
