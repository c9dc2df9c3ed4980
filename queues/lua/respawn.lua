-- respawn: move dead jobs back to the ready queue, oldest first (or the given
-- ids), each with tries = 1 and a new ttl (0 = never expires), as lmstfy does.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  now (ms)
-- ARGV[2]  ttl (s)
-- ARGV[3]  ready channel (pub/sub)
-- ARGV[4]  'oldest' or 'ids'
-- ARGV[5..]  for 'oldest': limit (bounded by the caller); for 'ids': job ids
-- Returns: {respawned, due}  due as in publish.lua

local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids
if ARGV[4] == 'oldest' then
  ids = redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[5]) - 1)
else
  ids = {}
  for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
end

local before = next_due()
local respawned, due = 0, -1
for _, id in ipairs(ids) do
  if redis.call('ZREM', DEAD, id) == 1 then
    local job = load_job(id)
    if job then
      job.tries = 1
      job.expire_at = expiry_after(now, ttl)
      make_ready(id, job)
      if job.expire_at > 0 and (due < 0 or job.expire_at < due) then due = job.expire_at end
    end
    respawned = respawned + 1
  end
end
if respawned > 0 then redis.call('PUBLISH', ARGV[3], respawned) end
count_total('resp_', respawned)
if due >= 0 and (before < 0 or due < before) then return {respawned, due} end
return {respawned, -1}
