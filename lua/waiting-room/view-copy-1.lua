--[[
  A copy of the line's view on a fan shard (src/waiting-room/line-view.ts): the room's admitter
  (the gateway holding the lease line-view-8.lua hands out) writes the view it read from the
  event's slot into the room's first shards every refresh, and every other gateway reads its view
  from one of them, beside its heartbeats, instead of calling the event's slot. One key, so the
  call runs on the shard's master alone.

  KEYS[1]  wr:{evt:E:s<k>.<salt>}:view   HASH
             head    the view's fields as the admitter read them (JSON text, line-view.ts)
             at      when the head was written (ms, this master's clock)
             listId  which list of vacated places `gone` is (the room's version of its vacated
                     places, the cursor and the length when the admitter read it)
             gone    that list (ascending places, comma-separated; '' when none)
           expiring COPY_TTL_MS after the last write: a room removed, or whose admitter stopped,
           leaves nothing behind for long
  ARGV[1]  mode:
    'put'  ARGV[2] head, ARGV[3] listId, ARGV[4] '1' when ARGV[5] carries the list, ARGV[5] the list.
           The list goes only when the writer does not know the shard holds listId already (a list
           is up to 2,000 places; the head changes every refresh, the list when fans leave).
    'get'  ARGV[2] the listId the reader holds ('' for none): the list is sent only when it differs.

  Returns
    put  1, or 0 when no list was sent and the shard holds another one (or none: the copy had
         expired): nothing is written, and the writer sends the list with its next put
    get  {} when there is no copy, else { age (ms since the head was written, this master's
         clock), head, listId, list or false when the reader holds this list already }
]]
--- @include "now-ms"

local COPY_TTL_MS = 5000
local key, mode = KEYS[1], ARGV[1]
local now = now_ms()

if mode == 'put' then
  if ARGV[4] ~= '1' then
    if redis.call('HGET', key, 'listId') ~= ARGV[3] then return 0 end
    redis.call('HSET', key, 'head', ARGV[2], 'at', string.format('%d', now))
  else
    redis.call('HSET', key, 'head', ARGV[2], 'at', string.format('%d', now), 'listId', ARGV[3], 'gone', ARGV[5])
  end
  redis.call('PEXPIRE', key, COPY_TTL_MS)
  return 1
end

if mode == 'get' then
  local v = redis.call('HMGET', key, 'head', 'at', 'listId')
  if not v[1] then return {} end
  local list = false
  if v[3] ~= ARGV[2] then list = redis.call('HGET', key, 'gone') or '' end
  return { math.max(0, now - (tonumber(v[2]) or 0)), v[1], v[3] or '', list }
end

return redis.error_reply('view-copy: unknown mode ' .. tostring(mode))
