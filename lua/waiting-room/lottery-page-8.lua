--[[
  A page of the drawn pre-queue in draw order (place offset+1 onwards), for audit: with the
  revealed seed, the membership hash and the beacon anyone can check it against their own
  recomputation (src/lottery/draw.ts). Refused before the draw.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  ARGV[1]     offset (0-based)
  ARGV[2]     limit (1..1000, checked by the caller)

  Returns { preCount, fanId... }, or
    -1  unknown event
    -7  not drawn yet
]]
--- @include "admission"

local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)
save_room(r)
if r.openedAt == 0 or r.drawn == 0 then return -7 end

local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = { int(r.preCount) }
for _, m in ipairs(redis.call('ZRANGE', K_PRE, offset, offset + limit - 1)) do
  out[#out + 1] = m
end
return out
