--[[
  A status poll's two rate limits, taken first in the poll's own call (status-10.lua,
  status-shard-11.lua), so a refused poll is one round trip and touches nothing of the line.

  Defines  poll_limited(ipKey, fanKey, now) -> nil, or the refusal to return:
             { 'limited', 'ip' | 'fan', 'retryAfterMs', ms }
           ARGV[2], ARGV[3]: the per-IP rate (tokens/s; 0: none) and burst; ARGV[4], ARGV[5]: the
           per-fan ones. The per-IP limit first: when it refuses, the fan's bucket is not touched.
           Written out, not a loop over a table of limits: no table is built on a poll that has none.
  Needs    room (int), token-bucket
]]
--- @include "room"
--- @include "token-bucket"

local function poll_limited(ipKey, fanKey, now)
  local ipRate, fanRate = tonumber(ARGV[2]), tonumber(ARGV[4])
  if ipRate > 0 then
    local allowed, retry = take_token(ipKey, ipRate, tonumber(ARGV[3]), 1, now)
    if allowed == 0 then return { 'limited', 'ip', 'retryAfterMs', int(retry) } end
  end
  if fanRate > 0 then
    local allowed, retry = take_token(fanKey, fanRate, tonumber(ARGV[5]), 1, now)
    if allowed == 0 then return { 'limited', 'fan', 'retryAfterMs', int(retry) } end
  end
  return nil
end
