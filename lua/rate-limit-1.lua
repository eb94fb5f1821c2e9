--[[
  Token bucket: allow a request when a token is left, refill continuously at a steady rate.

  KEYS[1]  the bucket (a hash: tokens, ts). One key per limited subject, e.g.
           rl:{ip:203.0.113.7}:join  or  rl:{fan:evt1:alice}:status

  ARGV[1]  rate: tokens added per second (> 0)
  ARGV[2]  burst: bucket capacity (>= 1)
  ARGV[3]  cost: tokens this request takes (usually 1)

  Returns  { allowed, retryAfterMs }
           allowed       1 when the request may go ahead, 0 when it is limited
           retryAfterMs  0 when allowed, else milliseconds until enough tokens exist

  Time comes from redis.call('TIME') so every gateway instance shares one clock.
]]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
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

redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
-- A full bucket carries no information: let it go once it would have refilled.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return { allowed, retry }
