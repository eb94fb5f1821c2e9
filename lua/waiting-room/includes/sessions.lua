--[[
  Admitted sessions: KEYS[7] (active) holds each session's expiry, KEYS[8] (sessions) its fan.
  A session counts against maxActive until it expires or ends (end-session-8.lua).

  Defines  live_sessions(now)          sessions not yet expired
           admit(r, fanId, f, now)     opens a session for the fan, spending one admission
           expire_sessions(r, now)     collects sessions past their expiry (MAX_EXPIRE a call)
  Needs    room, fans
  Keys     K_ACTIVE, K_SESSIONS, K_SEEN
]]
--- @include "room"
--- @include "fans"

local MAX_EXPIRE = 128     -- expired sessions collected per call

local function live_sessions(now)
  return redis.call('ZCOUNT', K_ACTIVE, '(' .. int(now), '+inf')
end

local function admit(r, fanId, f, now)
  r.sessSeq = r.sessSeq + 1
  -- Unique per room (its epoch, random at each creation) and per admission (the counter). Not
  -- the lottery commitment: a room created again after a Redis loss keeps the committed seed and
  -- restarts the counter, so a session id of the lost room would name a new fan's session, and a
  -- pre-loss purchase confirmed later would end that fan's session (end-session-8.lua).
  local room_tag = r.epoch
  if room_tag == '' then room_tag = string.sub(r.commitment, 1, 8) end  -- a room older than epochs
  local sid = room_tag .. '.' .. int(r.sessSeq)
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
