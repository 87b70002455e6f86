-- The frame of every crawl call: the epoch check, and once-only replies by request id (B:rq, B:rqt).
-- Local functions: crawl_call(keys, args, first), replayed(B), remember(B, now, stored, reply),
-- once(keys, args, first, body).
--- @include "state/lua/crawl_end"

-- KEYS[1] is B:c, a key the group's state always has: while a Cluster moves the group's slot, a call goes
-- to the node that holds it, so to the one that holds all of the group's keys if they move in one MIGRATE.
-- Checks the crawl's epoch (a server restarted empty, flushed or evicting has lost the crawl: the call
-- refuses rather than run on an empty state). Returns B and the time.
local function crawl_call(keys, args, first)
  bind()
  policy(args[first])
  if redis.call('HGET', keys[1], 'epoch') ~= P.epoch then
    fail('the crawl state is gone from the server (' .. keys[1] .. ' lacks epoch ' .. P.epoch ..
         '): it was restarted empty, flushed, or evicted keys')
  end
  return sub(keys[1], 1, -3), P.now
end

-- The reply of an earlier call with this request id (sent again after its reply was lost), or nil.
local function replayed(B)
  local stored = redis.call('HGET', B .. ':rq', P.rid)
  return stored and cmsgpack.unpack(stored)
end

-- Keeps `stored` as the call's reply for a lease_timeout (a call is not sent again later: its leases
-- would have expired), and forgets older ones. Returns reply.
local function remember(B, now, stored, reply)
  redis.call('HSET', B .. ':rq', P.rid, cmsgpack.pack(stored))
  redis.call('ZADD', B .. ':rqt', now, P.rid)
  local old = redis.call('ZRANGEBYSCORE', B .. ':rqt', '-inf', now - P.timeout, 'LIMIT', 0, 64)
  if #old > 0 then
    redis.call('HDEL', B .. ':rq', unpack(old))
    redis.call('ZREM', B .. ':rqt', unpack(old))
  end
  return reply
end

-- A call run once per request id: body(B, now) on the first, its stored reply on a repeat.
local function once(keys, args, first, body)
  local B, now = crawl_call(keys, args, first)
  local again = replayed(B)
  if again then return again end
  local reply = body(B, now)
  return remember(B, now, reply, reply)
end
