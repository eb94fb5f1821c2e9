--[[
  One seat's change on a cached section (used by seatmap-apply-8 and seatmap-load-7).
  A sold seat never goes back: a late 'available' or 'held' for a seat cached as sold is refused.

  keys     { st = KEYS of the status chars, idx = seat id -> position, exp = held seat -> expiry }
  id       seat id
  c        new status char: a | h | s
  expiry   hold expiry ms (for h)

  Returns  applied (false when refused), change in available seats (-1, 0 or 1)
]]
local function seatChange(keys, id, c, expiry)
  local delta = 0
  local pos = redis.call('HGET', keys.idx, id)
  if pos then
    pos = tonumber(pos)
    local old = redis.call('GETRANGE', keys.st, pos, pos)
    if old == 's' and c ~= 's' then return false, 0 end
    if old ~= c then
      redis.call('SETRANGE', keys.st, pos, c)
      if old == 'a' then delta = -1 end
      if c == 'a' then delta = 1 end
    end
  end
  if c == 'h' then
    redis.call('HSET', keys.exp, id, expiry)
  else
    redis.call('HDEL', keys.exp, id)
  end
  return true, delta
end

local seatCode = { available = 'a', held = 'h', sold = 's' }
