--[[
  One tick of the stats sampler (src/stats/sampler.ts) in one gateway process: records the events
  this process saw in use since its last tick, forgets those nobody used within ARGV[1], and
  answers the events to sample, most recently used first. Every process shares the list, so an
  event served by one gateway is sampled (by whichever process claims each slot) on all of them.

  KEYS[1]  {stats:<table>}:events   zset: event id, score = when it was last in use (Redis ms)
  ARGV[1]  how long an event stays listed after it was last in use, ms
  ARGV[2]  the most events to return
  ARGV[3..] the events this process saw in use since its last tick

  Returns  the listed events, most recently used first (at most ARGV[2])
]]
--- @include "now-ms"

local now = now_ms()
for i = 3, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[1])))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
