--[[
  Heartbeats of fans who polled, written where their places are kept: `seen` of a room without fan
  shards (line-view-8.lua) or a fan shard's `beats` (beats-1.lua 'keep'). Both take the fan ids as
  ARGV[from..].

  Defines  keep_beats(key, nowText, missing, from)
             records each fan of ARGV[from..] still in the zset `key` as seen at `nowText` (ZADD XX
             GT: a beat never re-adds a place swept away, nor moves one back) and appends the absent
             to `missing`, which it returns
]]

local function keep_beats(key, nowText, missing, from)
  -- ZADD XX GT CH first: it counts the beats it moved, so when that is every fan sent (the usual
  -- case) nobody is missing and no ZMSCORE is needed. A fan not moved (absent, or a beat of this
  -- same millisecond already there) sends the call to ZMSCORE, which names the absent (XX added
  -- none of them). The time goes as text: redis.call formats a Lua number with %.17g, once a fan.
  local args, sent = { 'XX', 'GT', 'CH' }, #ARGV - from + 1
  for i = 1, sent do
    args[2 * i + 2] = nowText
    args[2 * i + 3] = ARGV[from + i - 1]
  end
  if redis.call('ZADD', key, unpack(args)) < sent then
    local scores = redis.call('ZMSCORE', key, unpack(ARGV, from))
    for i = 1, sent do
      if not scores[i] then missing[#missing + 1] = ARGV[from + i - 1] end
    end
  end
  return missing
end
