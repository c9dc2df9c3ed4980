-- peek: read jobs without changing them (peek queue, peek job, dead-letter
-- listing, admin pages). Read-only.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  now (ms)
-- ARGV[2]  'head' (the next ready job), 'dead' (dead letter page) or 'ids'
-- ARGV[3..]  for 'dead': offset, limit; for 'ids': job ids
-- Returns: 8 fields per job found (_job.lua job_fields); a listed id whose job is
--          gone or expired is skipped, except for 'head', which returns the id
--          with an empty body and state -1 (lmstfy's "data: null" answer); a job
--          whose stored bytes do not decode comes back as its raw bytes, state -2

local now, mode = tonumber(ARGV[1]), ARGV[2]
local ids
if mode == 'head' then
  ids = redis.call('ZRANGE', READY, 0, 0)
elseif mode == 'dead' then
  local offset, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
  ids = redis.call('ZRANGE', DEAD, offset, offset + limit - 1)
else
  ids = {}
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
end

local result = {}
for _, id in ipairs(ids) do
  local packed = redis.call('HGET', JOBS, id)
  local job = packed and unpack_job(packed)
  if job and not is_expired(job, now) then
    for _, field in ipairs(job_fields(id, job, now)) do result[#result + 1] = field end
  elseif packed and not job then
    for _, field in ipairs({id, packed, 0, 0, '', '', 0, -2}) do result[#result + 1] = field end
  elseif mode == 'head' then
    for _, field in ipairs({id, '', 0, 0, '', '', 0, -1}) do result[#result + 1] = field end
  end
end
return result
