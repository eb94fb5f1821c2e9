--[[
  Token bucket: allow a request when a token is left, refill continuously at a steady rate.

  KEYS[1]  the bucket (includes/token-bucket.lua). One key per limited subject, e.g.
           lim:{ip:hold:203.0.113.7}  or  lim:{fan:hold:evt1:alice}
           (the waiting room's own buckets live under the event's tag, see
           src/waiting-room/keys.ts limitKey, and are taken by its scripts)

  ARGV[1]  rate: tokens added per second (> 0)
  ARGV[2]  burst: bucket capacity (>= 1)
  ARGV[3]  cost: tokens this request takes (usually 1)

  Returns  { allowed, retryAfterMs }
           allowed       1 when the request may go ahead, 0 when it is limited
           retryAfterMs  0 when allowed, else milliseconds until enough tokens exist

  Time comes from Redis (includes/now-ms.lua) so every gateway instance shares one clock.
]]
--- @include "now-ms"
--- @include "token-bucket"

local now = now_ms()

local allowed, retry = take_token(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), now)
return { allowed, retry }
