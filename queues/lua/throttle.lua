-- throttle: count one request in a token's fixed window (lmstfy's throttler),
-- or give one back (an empty consume or a failed publish does not count).
--
-- KEYS[1]  keys.rate_counter  string counter
-- ARGV[1]  'take' or 'give'
-- ARGV[2]  window (s), for 'take'
-- Returns: the counter after the change (0 when 'give' found no window)

if ARGV[1] == 'take' then
  local count = redis.call('INCR', KEYS[1])
  if count == 1 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2])) end
  return count
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('DECR', KEYS[1])
end
return 0
