--[[
  The hot-seat shield. Before a hold goes to DynamoDB, checks the cached status of every requested
  seat and takes a short intent lease on each, all or nothing. A fan who loses is told at once,
  with no DynamoDB request. DynamoDB stays the only authority: this only filters doomed writes,
  and a stale cache costs a retry, never an oversell.

  Called with a variable key count: numkeys = 3 + number of seats.
  KEYS[1]      sm:{evt:E}:sec:S:st   status chars of the section (see seatmap-load-7.lua)
  KEYS[2]      sm:{evt:E}:sec:S:idx  seat id -> position
  KEYS[3]      sm:{evt:E}:sec:S:exp  held seat id -> hold expiry ms
  KEYS[4..]    lease:{evt:E}:<seatId>, one per requested seat, in the order of ARGV[3..]

  ARGV[1]      lease time, ms
  ARGV[2]      lease owner (a random id of this hold attempt)
  ARGV[3..]    seat ids

  Returns (codes named in src/seatmap/cache.ts SHIELD_CODES)
           { 1 }                  leases taken on every seat: go to DynamoDB
           { 2 }                  the section is not cached: go to DynamoDB without leases
           { 0, seatId, ... }     the seats that are sold, held (unexpired) or leased to another
                                  attempt; no lease was taken
]]
--- @include "now-ms"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return { 2 }
end

local now = now_ms()
local lost = {}

for i = 3, #ARGV do
  local id = ARGV[i]
  local leaseKey = KEYS[i + 1]
  local taken = false
  local pos = redis.call('HGET', KEYS[2], id)
  if pos then
    pos = tonumber(pos)
    local c = redis.call('GETRANGE', KEYS[1], pos, pos)
    if c == 's' then
      taken = true
    elseif c == 'h' then
      local expiry = tonumber(redis.call('HGET', KEYS[3], id) or '0')
      if expiry > now then taken = true end
    end
  end
  if not taken then
    local owner = redis.call('GET', leaseKey)
    if owner and owner ~= ARGV[2] then taken = true end
  end
  if taken then lost[#lost + 1] = id end
end

if #lost > 0 then
  return { 0, unpack(lost) }
end
for i = 3, #ARGV do
  redis.call('SET', KEYS[i + 1], ARGV[2], 'PX', ARGV[1])
end
return { 1 }
