--[[
  Applies seat changes of one section to its cached seat map (write-through after DynamoDB
  answered, or from the cache-refresh worker) and publishes them to every gateway instance.

  KEYS[1]  sm:{evt:E}:sec:S:st    status chars (see seatmap-load-5.lua)
  KEYS[2]  sm:{evt:E}:sec:S:idx   seat id -> position
  KEYS[3]  sm:{evt:E}:sec:S:exp   held seat id -> hold expiry ms
  KEYS[4]  sm:{evt:E}:sec:S:meta  gen, v, ids, total
  KEYS[5]  sm:{evt:E}:avail       section id -> available count
  KEYS[6]  seatmap:{evt:E}        pub/sub channel of the event's seat changes

  ARGV[1]  section id
  ARGV[2..] triples: seat id, status (available | held | sold), hold expiry ms (0 when not held)

  Returns  the new version, or 0 when the section is not cached (nothing to update; the next
           read loads it from DynamoDB) — the change is still published for live viewers.
  A sold seat never goes back: a late 'available' or 'held' for a seat cached as sold is ignored.
]]
local cached = redis.call('EXISTS', KEYS[4]) == 1
local code = { available = 'a', held = 'h', sold = 's' }
local published = {}
local delta = 0

for i = 2, #ARGV, 3 do
  local id, status, expiry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local c = code[status]
  if c then
    local apply = true
    if cached then
      local pos = redis.call('HGET', KEYS[2], id)
      if pos then
        pos = tonumber(pos)
        local old = redis.call('GETRANGE', KEYS[1], pos, pos)
        if old == 's' and c ~= 's' then
          apply = false
        elseif old ~= c then
          redis.call('SETRANGE', KEYS[1], pos, c)
          if old == 'a' then delta = delta - 1 end
          if c == 'a' then delta = delta + 1 end
        end
      end
    end
    if apply then
      if c == 'h' then
        redis.call('HSET', KEYS[3], id, expiry)
      else
        redis.call('HDEL', KEYS[3], id)
      end
      published[#published + 1] = { id = id, status = status }
    end
  end
end

local version = 0
if cached then
  version = redis.call('HINCRBY', KEYS[4], 'v', 1)
  if delta ~= 0 then redis.call('HINCRBY', KEYS[5], ARGV[1], delta) end
end
if #published > 0 then
  redis.call('PUBLISH', KEYS[6], cjson.encode(published))
end
return version
