--[[
  What became of each place the cursor passed, in a room whose records live on the fan shards
  (room.lua shard_records; docs/redis-cluster.md "Steps 2 and 3, call by call"): KEYS[9] `claims`,
  place -> "sid|exp|at" of the session claimed there, 'x' lost, 'r' revoked. A retried or
  concurrent claim of one place is the same claim; a place lost or revoked cannot be claimed after.

  Defines  K_CLAIMS
           claim_place(r, place, fanId, now) -> 'session', sid, exp, at | 'lost' | 'revoked'
                                      the fan at a passed place takes the session offered there
                                      (its admittedAt the offer's time, as admission.lua
                                      claim_passed), or learns the place lost (the offer given
                                      back: unclaimed past its time, or by a give-up)
  Needs    room, admission (OFFER_GRACE_MS)
  Keys     K_CLAIMS, K_ACTIVE, K_SESSIONS
]]
--- @include "admission"

local K_CLAIMS = KEYS[9]

local function claim_place(r, place, fanId, now)
  local key = int(place)
  local before = redis.call('HGET', K_CLAIMS, key)
  if before == 'x' then return 'lost' end
  if before == 'r' then return 'revoked' end
  if before then
    local sid, exp, at = string.match(before, '^([^|]*)|(%d+)|(%d+)$')
    return 'session', sid, tonumber(exp), tonumber(at)
  end
  local givenBack = tonumber(redis.call('ZSCORE', K_ACTIVE, OFFER .. key))
  if not givenBack or givenBack <= now then
    if givenBack then
      redis.call('ZREM', K_ACTIVE, OFFER .. key)
      r.offered = r.offered - 1
    end
    redis.call('HSET', K_CLAIMS, key, 'x')
    r.abandoned = r.abandoned + 1
    return 'lost'
  end
  redis.call('ZREM', K_ACTIVE, OFFER .. key)
  r.offered = r.offered - 1
  r.sessSeq = r.sessSeq + 1
  local sid = r.epoch .. '.' .. int(r.sessSeq)
  local exp = now + r.sessionSeconds * 1000
  local at = math.min(now, givenBack - r.abandonSeconds * 1000 - OFFER_GRACE_MS)
  redis.call('ZADD', K_ACTIVE, int(exp), sid)
  redis.call('HSET', K_SESSIONS, sid, fanId)
  redis.call('HSET', K_CLAIMS, key, sid .. '|' .. int(exp) .. '|' .. int(at))
  r.admitted = r.admitted + 1
  return 'session', sid, exp, at
end
