--[[
  Opens a fill of a section's seat-map cache, before the fill reads the authoritative store.
  From now until the window ends, every seatmap-apply-8 on the section is also written to its
  journal, and the fill replays what came after its own entry on top of what it read
  (seatmap-load-7). A change whose DynamoDB write answered before this script ran is in what
  the fill reads; one applied after is in the journal; so no change falls between the read and
  the fill (a plain read-then-write fill lost them, and a seat sold in that gap stayed `held`).

  KEYS[1]  sm:{evt:E}:sec:S:jr    stream, the section's journal of changes while fills are open
  KEYS[2]  sm:{evt:E}:sec:S:fill  string, present while a fill is open (expires after the window)

  ARGV[1]  window, ms: how long a fill may take; a later load refuses to fill (seatmap-load-7)

  Returns  the journal entry id of this fill's start
]]
local window = tonumber(ARGV[1])
redis.call('SET', KEYS[2], '1', 'PX', window)
local id = redis.call('XADD', KEYS[1], '*', 'fill', '1')
redis.call('PEXPIRE', KEYS[1], window * 2)
return id
