--[[
  The one clock of every script: Redis time, so every gateway instance shares it (a caller's
  clock is never passed in ARGV). Inlined where a script says `--- @include "now-ms"`.

  Defines  now_ms()  milliseconds since the Unix epoch, an integer (redis.call('TIME'))
]]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
