--[[
  The event's slot's part of a claim, a revocation and a give-up, in a room whose records live on
  the fan shards (room.lua shard_records; docs/redis-cluster.md "Steps 2 and 3, call by call",
  steps 2, 3 and 5). The slot knows places, never records: `claims` (KEYS[9]) says what became of
  each place passed, so a retried or concurrent claim of one place is the same claim, a place given
  up or revoked cannot be claimed after, and a place claimed keeps its session against a give-up
  that raced it. Built ahead of its callers (the gateway's poll, sweep and revocation in such a
  room).

  KEYS[1..8]  the line's keys (includes/room.lua)
  KEYS[9]     claims  HASH place -> "sid|exp|at" (the session claimed), 'x' (lost), 'r' (revoked)
  ARGV[1]     mode:
    'claim'   ARGV[2] place, ARGV[3] fanId: the fan whose shard holds it waiting at that place
              (fan-records-5.lua 'poll') takes the session offered there. A place claimed before
              answers that claim; a place not yet passed answers 'ahead'; an offer still there
              becomes a session (its admittedAt the offer's time, as admission.lua claim_passed);
              an offer given back (unclaimed past its time, or by a give-up) is lost ('x')
    'revoke'  ARGV[2] place (0: the fan held none): the place barred ('r'); a session claimed
              there is ended; a place ahead of the cursor is vacated, a passed one's offer given
              back; a place lost before stays lost
    'gone'    ARGV[2] '1' when the sweep read every stale beat (sweptAt is recorded, as
              abandon-8.lua), ARGV[3..] the places the shards gave up or vacated, as their `given`
              names them (fan-records-5.lua): 'x:<place>' a fan given up (counted `abandoned`),
              'v:<place>' a reservation no fan took (taken back out of `joined`), '<place>'
              another place vacated. Each ahead of the cursor goes to `gone`, each passed is lost
              ('x') and gives its offer back, unless claimed; each is counted only the first time
              it is told (a place told again by an overlapping sweep is found done)

  Returns
    claim   { 'session', sid, exp, at } | { 'lost' } | { 'revoked' } | { 'ahead' }
    revoke  { 'ended', sid, freed 1|0 } (a session was claimed there: ended, its slot freed when it
            was still live) | { 'barred' } | { 'claimed-before', 'x' or 'r' }
    gone    { 'vacated', n (to `gone`), 'offersBack', n, 'claimed', n (left as claimed), 'sweptAt', ms or 0,
            'abandoned', n (the fans given up counted now: not those an overlapping sweep told first) }
    -1 unknown event
]]
--- @include "admission"
--- @include "place-claims"

local mode = ARGV[1]
local r = load_room()
if not r then return -1 end
if not shard_records(r) then return redis.error_reply('claims: the room keeps its records on the event slot') end
local now = now_ms()

-- A passed place's offer back: true when it was still outstanding.
local function offer_back(place)
  if redis.call('ZREM', K_ACTIVE, OFFER .. int(place)) == 1 then
    r.offered = r.offered - 1
    return true
  end
  return false
end

if mode == 'claim' then
  local place, fanId = tonumber(ARGV[2]), ARGV[3]
  tick(r, now)
  -- a place not passed has no claim to answer, but a revoked one ahead of the cursor (barred)
  local decided = redis.call('HEXISTS', K_CLAIMS, int(place)) == 1
  if not decided and (r.openedAt == 0 or place > r.served) then
    save_room(r)
    return { 'ahead' }
  end
  local kind, sid, exp, at = claim_place(r, place, fanId, now)
  save_room(r)
  if kind == 'session' then return { 'session', sid, int(exp), int(at) } end
  return { kind }
end

if mode == 'revoke' then
  local place = tonumber(ARGV[2]) or 0
  if place <= 0 then return { 'barred' } end
  tick(r, now)
  local before = redis.call('HGET', K_CLAIMS, int(place))
  local out
  if before == 'x' or before == 'r' then
    out = { 'claimed-before', before }
  elseif before then
    local sid = string.match(before, '^([^|]*)|')
    local exp = tonumber(redis.call('ZSCORE', K_ACTIVE, sid))
    local freed = 0
    if exp and exp > now then
      redis.call('ZREM', K_ACTIVE, sid)
      freed = 1
      serve(r, now)
    end
    redis.call('HSET', K_CLAIMS, int(place), 'r')
    r.revoked = r.revoked + 1
    out = { 'ended', sid, freed }
  else
    redis.call('HSET', K_CLAIMS, int(place), 'r')
    if r.openedAt > 0 and place <= r.served then
      offer_back(place)
    else
      redis.call('ZADD', K_GONE, int(place), int(place))
    end
    r.revoked = r.revoked + 1
    out = { 'barred' }
  end
  save_room(r)
  return out
end

if mode == 'gone' then
  tick(r, now)
  local vacated, back, claimed, sweptAt = 0, 0, 0, 0
  -- what each place was, counted when it is done here the first time: a fan given up (x:) in
  -- `abandoned`; a reservation no fan took (v:), which the range counted joined, out of `joined`
  local counts = { ['x:'] = 0, ['v:'] = 0 }
  for i = 3, #ARGV do
    local tag = string.sub(ARGV[i], 1, 2)
    if not counts[tag] then tag = nil end
    local place = tonumber(tag and string.sub(ARGV[i], 3) or ARGV[i])
    local first = false
    if redis.call('HEXISTS', K_CLAIMS, int(place)) == 1 then
      claimed = claimed + 1
    elseif r.openedAt == 0 or place > r.served then
      local added = redis.call('ZADD', K_GONE, int(place), int(place))
      vacated = vacated + added
      first = added == 1
    else
      -- passed: lost for good, so a claim of it later is answered so and counted once
      redis.call('HSET', K_CLAIMS, int(place), 'x')
      if offer_back(place) then back = back + 1 end
      first = true
    end
    if tag and first then counts[tag] = counts[tag] + 1 end
  end
  r.abandoned = r.abandoned + counts['x:']
  r.joined = math.max(0, r.joined - counts['v:'])
  if ARGV[2] == '1' and r.openedAt > 0 and r.drawn ~= 0 then
    sweptAt = now
    r.sweptAt = now
  end
  -- the offers given back free their slots: the cursor may offer the next places now
  if back > 0 then serve(r, now) end
  save_room(r)
  return { 'vacated', int(vacated), 'offersBack', int(back), 'claimed', int(claimed), 'sweptAt', int(sweptAt),
    'abandoned', int(counts['x:']) }
end

return redis.error_reply('claims: unknown mode ' .. tostring(mode))
