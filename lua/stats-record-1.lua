--[[
  Adds one sample to an event's stats history (src/stats/sampler.ts) and trims the history to its
  window: samples older than ARGV[3] before this one go, and never more than ARGV[4] are kept.
  The key expires ARGV[3] after the last sample, so an event nobody samples any more leaves
  nothing behind.

  KEYS[1]  st:{evt:E}:history   zset: member = the sample (JSON), score = its time (Redis ms)
  ARGV[1]  the sample's time, ms (as stats-claim-1 answered it)
  ARGV[2]  the sample, JSON
  ARGV[3]  the window, ms
  ARGV[4]  the most samples kept

  Returns  the number of samples now kept
]]
local at = tonumber(ARGV[1])
local window = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], at, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (at - window))
local kept = redis.call('ZCARD', KEYS[1])
local most = tonumber(ARGV[4])
if kept > most then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, kept - most - 1)
  kept = most
end
redis.call('PEXPIRE', KEYS[1], window)
return kept
