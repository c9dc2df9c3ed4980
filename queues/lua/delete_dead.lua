-- delete_dead: delete dead jobs, oldest first (or the given ids), with their data.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  'oldest' or 'ids'
-- ARGV[2..]  for 'oldest': limit (bounded by the caller); for 'ids': job ids
-- Returns: how many were deleted

local ids
if ARGV[1] == 'oldest' then
  ids = redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[2]) - 1)
else
  ids = {}
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local deleted = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', DEAD, id) == 1 then
    redis.call('HDEL', JOBS, id)
    deleted = deleted + 1
  end
end
return deleted
