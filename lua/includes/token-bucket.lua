--[[
  The token bucket (used by rate-limit-1, and by waiting-room/status-10 and join-9, which check a
  request's limits in the same call as the line so a poll is one round trip). One algorithm in
  Lua; src/http/middleware/rate-limit.ts has the same one in memory for when Redis is away.

  key     the bucket (a hash: tokens, ts), expired once it would have refilled
  rate    tokens added per second (> 0)
  burst   bucket capacity (>= 1)
  cost    tokens this request takes (usually 1)
  now     Redis time in ms (redis.call('TIME'), taken by the caller)

  Returns  allowed (1 | 0), retryAfterMs (0 when allowed, else ms until enough tokens exist)
]]
local function take_token(key, rate, burst, cost, now)
  local state = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens = tonumber(state[1])
  local ts = tonumber(state[2])
  if tokens == nil then
    tokens = burst
    ts = now
  end

  local elapsed = math.max(0, now - ts)
  tokens = math.min(burst, tokens + elapsed * rate / 1000)

  local allowed = 0
  local retry = 0
  if tokens >= cost then
    tokens = tokens - cost
    allowed = 1
  else
    retry = math.ceil((cost - tokens) * 1000 / rate)
  end

  redis.call('HSET', key, 'tokens', tokens, 'ts', now)
  -- A full bucket carries no information: let it go once it would have refilled.
  redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
  return allowed, retry
end
