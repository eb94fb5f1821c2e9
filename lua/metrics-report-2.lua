--[[
  One scrape of /metrics in one gateway process (src/metrics-reporter.ts): records the events this
  process serves, and settles which process exports the event-wide gauges. Every gateway reads
  the same waiting-room figures from Redis; if each exported them, a sum over pods would multiply
  them by the number of pods. The holder renews its lease at each scrape; a process that finds the
  lease free takes it; the others export none.

  KEYS[1]  {metrics:<table>}:event-gauges-reporter   the lease (string: the holder's id)
  KEYS[2]  {metrics:<table>}:events                  events served (zset, score: last seen ms)
  ARGV[1]  this process's id
  ARGV[2]  lease length, ms
  ARGV[3]  now, ms (the caller's clock; only orders the events)
  ARGV[4]  how long an event stays listed after it was last served, ms
  ARGV[5]  the most events to return
  ARGV[6..] the events this process served

  Returns  {1, event, event, ...} when this process holds the lease now (renewed or taken): the
           events served by any process within ARGV[4], newest first; {0} when another holds it
]]
local now = tonumber(ARGV[3])
for i = 6, #ARGV do
  redis.call('ZADD', KEYS[2], now, ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[4]))

local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  return {0}
end
local reply = {1}
local events = redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[5]) - 1)
for i = 1, #events do reply[#reply + 1] = events[i] end
return reply
