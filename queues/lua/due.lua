-- due: the queue's earliest timer. Read-only.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- Returns: the earliest due time over delayed, inflight and expiry (ms), or -1

return next_due()
