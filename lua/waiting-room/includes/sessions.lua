--[[
  Admitted sessions: KEYS[7] (active) holds each session's expiry, KEYS[8] (sessions) its fan.
  A session counts against maxActive until it expires or ends (end-session-8.lua).

  Defines  live_sessions(now)          sessions not yet expired
           admit(r, fanId, f, now, decidedAt)  opens a session for the fan, spending one
                                       admission (a room with claims spent it when it offered the
                                       place, at decidedAt: the fan's admittedAt)
           expire_sessions(r, now)     collects sessions past their expiry (MAX_EXPIRE a call),
                                       and offers past theirs (room.lua claims)
  Needs    room, fans
  Keys     K_ACTIVE, K_SESSIONS, K_SEEN
]]
--- @include "room"
--- @include "fans"

local MAX_EXPIRE = 128     -- expired sessions collected per call

local function live_sessions(now)
  return redis.call('ZCOUNT', K_ACTIVE, '(' .. int(now), '+inf')
end

local function admit(r, fanId, f, now, decidedAt)
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
  -- when the line decided (a room with claims: when it offered the place, before this claim)
  f.at = decidedAt or now
  put_fan(fanId, f)
  r.admitted = r.admitted + 1
  -- a room with claims spent the credit when the cursor offered the place (admission.lua)
  if not claims(r) then r.credit = r.credit - 1 end
end

local function expire_sessions(r, now)
  local due = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', int(now), 'LIMIT', 0, MAX_EXPIRE)
  for _, sid in ipairs(due) do
    redis.call('ZREM', K_ACTIVE, sid)
    -- an offer nobody claimed in time is given back (room.lua OFFER): its place is lost, and the
    -- fan learns it at its next poll (admission.lua claim_passed)
    local offer = claims(r) and string.sub(sid, 1, #OFFER) == OFFER
    local fanId = nil
    if offer then r.offered = r.offered - 1 else
      r.expired = r.expired + 1
      fanId = redis.call('HGET', K_SESSIONS, sid)
    end
    if fanId then
      local f = get_fan(fanId)
      if f and f.s == 'a' and f.sid == sid then
        f.s = 'e'
        put_fan(fanId, f)
      end
    end
  end
end
