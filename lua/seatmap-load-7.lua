--[[
  Fills a section's seat-map cache from the authoritative store (a cache miss, or a rebuild), then
  replays on top the changes applied since the fill opened (seatmap-fill-begin-2), so that a
  change made while the store was being read is not lost.

  KEYS[1]  sm:{evt:E}:sec:S:st    string, one status char per seat in seat order: a | h | s
  KEYS[2]  sm:{evt:E}:sec:S:idx   hash, seat id -> 0-based position in KEYS[1]
  KEYS[3]  sm:{evt:E}:sec:S:exp   hash, held seat id -> hold expiry (epoch ms); also an available
                                  seat whose lapsed hold is not swept yet (the sweep reads it)
  KEYS[4]  sm:{evt:E}:sec:S:meta  hash: gen (cache generation), v (version), ids (seat ids, comma-joined)
  KEYS[5]  sm:{evt:E}:avail       hash, section id -> seats not sold and not held (event summary)
  KEYS[6]  sm:{evt:E}:sec:S:jr    stream, the section's journal (seatmap-fill-begin-2)
  KEYS[7]  sm:{evt:E}:sec:S:fill  string, present while a fill is open

  ARGV[1]  force: 1 replaces what is cached (rebuild), 0 only fills a miss
  ARGV[2]  generation id for this fill (changes the ETag even when the version restarts)
  ARGV[3]  section id
  ARGV[4]  seat ids, comma-joined, in seat order
  ARGV[5]  statuses, one char per seat, same order
  ARGV[6]  the journal entry id seatmap-fill-begin-2 returned for this fill
  ARGV[7]  window, ms (as given to seatmap-fill-begin-2)
  ARGV[8..] pairs: seat id, hold expiry ms (held seats, and lapsed holds not swept yet)

  Returns  1 when filled, 0 when a fill was not needed (already cached and not forced), -1 when
           the journal cannot cover this fill (it took longer than the window, or Redis lost the
           journal meanwhile): nothing is written, and the section is read again later.
]]
--- @include "now-ms"
--- @include "seat-change"

if ARGV[1] ~= '1' and redis.call('EXISTS', KEYS[4]) == 1 then
  return 0
end

local start = ARGV[6]
local now = now_ms()
local startMs = tonumber(string.match(start, '^(%d+)'))
if now - startMs > tonumber(ARGV[7]) or #redis.call('XRANGE', KEYS[6], start, start) == 0 then
  return -1
end

local version = 1
local previous = redis.call('HGET', KEYS[4], 'v')
if previous then version = tonumber(previous) + 1 end

redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('SET', KEYS[1], ARGV[5])

local ids = ARGV[4]
local i = 0
local batch = {}
for id in string.gmatch(ids, '[^,]+') do
  batch[#batch + 1] = id
  batch[#batch + 1] = i
  i = i + 1
  if #batch >= 1000 then
    redis.call('HSET', KEYS[2], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('HSET', KEYS[2], unpack(batch)) end

for j = 8, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[j], ARGV[j + 1])
end

-- What was applied while the store was read, in the order it was applied.
local keys = { st = KEYS[1], idx = KEYS[2], exp = KEYS[3] }
for _, entry in ipairs(redis.call('XRANGE', KEYS[6], '(' .. start, '+')) do
  local fields = entry[2]
  for f = 1, #fields, 2 do
    if fields[f] == 'c' then
      local changes = cjson.decode(fields[f + 1])
      for c = 1, #changes, 3 do
        local code = seatCode[changes[c + 1]]
        if code then seatChange(keys, changes[c], code, changes[c + 2]) end
      end
    end
  end
end

local _, available = string.gsub(redis.call('GET', KEYS[1]), 'a', 'a')
redis.call('HSET', KEYS[4], 'gen', ARGV[2], 'v', version, 'ids', ids, 'total', i)
redis.call('HSET', KEYS[5], ARGV[3], available)
return 1
