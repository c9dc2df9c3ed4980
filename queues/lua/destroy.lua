-- destroy: delete up to `limit` live jobs (ready, delayed, in flight) of a queue,
-- with their data. The dead letter is kept, as upstream. The caller repeats
-- while a full batch comes back, so Redis is never blocked by a huge queue.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  limit
-- Returns: {deleted, remaining, gone}
--   remaining  1 when live jobs are left (call again)
--   gone       1 when nothing is left at all: no dead letter and not paused (the
--              queue's meta was deleted too; a pause outlives a destroy)

local limit = tonumber(ARGV[1])
local deleted = 0
for _, key in ipairs({READY, DELAYED, INFLIGHT}) do
  while deleted < limit do
    local ids = redis.call('ZRANGE', key, 0, math.min(limit - deleted, 500) - 1)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do forget_job(id) end
    deleted = deleted + #ids
  end
end
local remaining = redis.call('ZCARD', READY) + redis.call('ZCARD', DELAYED) + redis.call('ZCARD', INFLIGHT)
local gone = 0
if remaining == 0 and redis.call('ZCARD', DEAD) == 0 and redis.call('HEXISTS', META, 'paused') == 0 then
  redis.call('DEL', META, EXPIRY, JOBS)
  gone = 1
end
if remaining > 0 then remaining = 1 end
return {deleted, remaining, gone}
