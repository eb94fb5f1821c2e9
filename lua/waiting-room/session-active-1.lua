--[[
  Is this admitted session still active (not expired, completed or revoked)? Read-only; the
  one Redis round trip that claim paths add to the signature check of an access token.

  KEYS[1]  active  ZSET  sessionId -> expiry (ms) of the event's waiting room
  ARGV[1]  sessionId

  Returns 1 active, 0 not (unknown, ended, or past its expiry)
]]

local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if exp > now then return 1 end
return 0
