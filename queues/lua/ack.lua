-- ack: delete a job in any state and every trace of it (data, ready entry,
-- timers, dead-letter entry) in one step.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  job id
-- Returns: 1 if the job existed, else 0

local deleted = forget_job(ARGV[1])
count_total('ack_', deleted)
return deleted
