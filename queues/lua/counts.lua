-- counts: a queue's depths, pause flag and cumulative totals in one call, for
-- /metrics, which reads every queue at each scrape (one command per queue
-- instead of five). Read-only.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1..]   names of the meta hash totals to read (inspect.TOTAL_FIELDS)
-- Returns: {ready, delayed, inflight, dead, paused (1 or 0), then one value per
--          ARGV total (nil when the queue never counted that kind)}

local found = {redis.call('ZCARD', READY), redis.call('ZCARD', DELAYED), redis.call('ZCARD', INFLIGHT),
               redis.call('ZCARD', DEAD), redis.call('HEXISTS', META, 'paused')}
for _, total in ipairs(redis.call('HMGET', META, unpack(ARGV))) do found[#found + 1] = total end
return found
