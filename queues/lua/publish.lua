-- publish: store one or more jobs (single and bulk publish) and make each ready
-- or delayed.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- KEYS[8]     idempotency key (string, optional: keys.idempotency)
-- ARGV[1]  now (ms)
-- ARGV[2]  delay (ms); 0 = ready now
-- ARGV[3]  ttl (s); 0 = never expires
-- ARGV[4]  tries (>= 1)
-- ARGV[5]  priority (0..255)
-- ARGV[6]  content type ("" when the publisher sent none)
-- ARGV[7]  attributes (JSON text, or "")
-- ARGV[8]  ready channel (pub/sub, wakes long polls)
-- ARGV[9]  idempotency window (s)
-- ARGV[10], ARGV[11], ...  job id, body pairs
-- Returns:
--   {0, created, due}  published; created = 1 when this made the queue; due = the new
--                      earliest timer of the queue (ms) when it got earlier, else -1
--   {1, ids}           duplicate idempotency key: the first publish's job ids (comma-joined)
--   {2, id}            a job with this id already exists; nothing was written

local now, delay, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tries, priority = tonumber(ARGV[4]), tonumber(ARGV[5])
local IDEMPOTENCY = KEYS[8]

if IDEMPOTENCY then
  local first = redis.call('GET', IDEMPOTENCY)
  if first then return {1, first} end
end
local given = {}
for i = 10, #ARGV, 2 do given[#given + 1] = ARGV[i] end
local existing = redis.call('HMGET', JOBS, unpack(given))
for i, found in ipairs(existing) do
  if found then return {2, given[i]} end
end

local before = next_due()
local expire_at = expiry_after(now, ttl)
local added_due = -1
local ids = {}
local batch = new_batch()
for i = 10, #ARGV, 2 do
  local id = ARGV[i]
  local job = {priority = priority, tries = tries, deliveries = 0, expire_at = expire_at,
               ctype = ARGV[6], attrs = ARGV[7], body = ARGV[i + 1]}
  if delay > 0 then
    batch_delayed(batch, id, job, now + delay)
  else
    batch_ready(batch, id, job)
  end
  ids[#ids + 1] = id
end
flush(batch)
if delay > 0 then
  added_due = now + delay
elseif expire_at > 0 then
  added_due = expire_at
end

if delay == 0 then redis.call('PUBLISH', ARGV[8], #ids) end
count_event('pub_', #ids, now)
if IDEMPOTENCY then redis.call('SET', IDEMPOTENCY, table.concat(ids, ','), 'EX', tonumber(ARGV[9])) end
local created = redis.call('HSETNX', META, 'created_ms', num(now))
if added_due >= 0 and (before < 0 or added_due < before) then return {0, created, added_due} end
return {0, created, -1}
