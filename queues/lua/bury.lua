-- bury: move an in-flight job straight to the dead letter (the notifier's
-- "410 Gone" and "attempts exhausted" outcomes).
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  job id
-- Returns: 1 if buried, 0 if there is no such in-flight job

local job = load_job(ARGV[1])
if not job or job.state ~= STATE_INFLIGHT then return 0 end
redis.call('ZREM', INFLIGHT, ARGV[1])
make_dead(ARGV[1], job)
count_total('dead_', 1)
return 1
