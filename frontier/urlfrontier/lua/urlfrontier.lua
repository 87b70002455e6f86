-- The URL Frontier service's Functions library (frontier.urlfrontier.redis_store): put, lease, update, queue
-- deletion and purge of one crawl, each one atomic call. Every function: KEYS[1] = K:queues (it routes the call
-- to the crawl's slot: all its keys share one hash tag); ARGV[1] = K, the crawl's key prefix; ARGV[2...] as each
-- function says. Key layout: the docstring of frontier.urlfrontier.redis_store.
--- @include "state/lua/seen"

local K  -- the crawl's key prefix: args[1] of every call
local function qget(q)
  local r = redis.call('HGET', K .. ':queues', q)
  if not r then return nil end
  local t = {}
  for x in string.gmatch(r, '%S+') do t[#t + 1] = tonumber(x) end
  return t
end
local function qset(q, t)
  redis.call('HSET', K .. ':queues', q, string.format('%d %d %d %d %d %d', t[1], t[2], t[3], t[4], t[5], t[6]))
end
local function record(q, fp)
  local r = redis.call('HGET', K .. ':u:' .. q, fp)
  local nxt, due, seq, created, prio = string.match(r, '(%d+) (%d+) (%d+) (%d+) (%S+)')
  return tonumber(nxt), tonumber(due), tonumber(seq), tonumber(created), tonumber(prio)
end
local function set_record(q, fp, nxt, due, seq, created, prio)
  redis.call('HSET', K .. ':u:' .. q, fp, string.format('%d %d %d %d %.17g', nxt, due, seq, created, prio))
end
-- a URL not done, due at `due`, into the queue's waiting set (not due by `now`) or its ready set
local function schedule(q, fp, due, seq, prio, now)
  if due <= now then
    redis.call('ZADD', K .. ':r:' .. q, string.format('%.17g', -prio), string.format('%016x%016x', due, seq) .. fp)
  else
    redis.call('ZADD', K .. ':s:' .. q, due, string.format('%016x', seq) .. fp)
  end
end
local function remove(q, fp)
  local nxt, due, seq, created = record(q, fp)
  for _, s in ipairs({':u:', ':l:', ':m:', ':h:'}) do redis.call('HDEL', K .. s .. q, fp) end
  local t = qget(q)
  if nxt > 0 then
    redis.call('ZREM', K .. ':s:' .. q, string.format('%016x', seq) .. fp)
    redis.call('ZREM', K .. ':r:' .. q, string.format('%016x%016x', due, seq) .. fp)
    t[5] = t[5] - 1
  else
    t[4] = t[4] - 1
  end
  qset(q, t)
  return created
end

-- args: K, now, the items' 8-byte fingerprints (sorted, unique), load, allocator, then 8 per item
local function uf_put(args)
  local now, packed = tonumber(args[2]), args[3]
  -- a URL with a record is seen: a known item of one (an ack) needs no seen-test
  local asked = {}
  for b = 6, #args, 8 do
    if args[b] == '1' or redis.call('HEXISTS', K .. ':index', args[b + 2]) == 0 then
      asked[string.sub(args[b + 2], 1, 8)] = true
    end
  end
  local probes = {}
  for i = 1, #packed / 8 do
    local short = string.sub(packed, 8 * i - 7, 8 * i)
    if asked[short] then probes[#probes + 1] = short end
  end
  local fresh = {}
  if #probes > 0 then
    local flags = seen_add(K .. ':seen', table.concat(probes), tonumber(args[4]), args[5] == 'jemalloc')
    for i, short in ipairs(probes) do fresh[short] = string.byte(flags, i) == 49 end
  end
  local out = {}
  for b = 6, #args, 8 do
    local disc, q, fp, nxt, created = args[b], args[b + 1], args[b + 2], tonumber(args[b + 3]), tonumber(args[b + 4])
    local url, metadata, prio = args[b + 5], args[b + 6], tonumber(args[b + 7])
    local short = string.sub(fp, 1, 8)
    if disc == '1' and not fresh[short] then
      out[#out + 1] = 0  -- seen before, or twice in this call
    else
      fresh[short] = false
      local old = redis.call('HGET', K .. ':index', fp)
      if old then
        local was = remove(old, fp)
        if created == 0 then created = was end
      end
      if created == 0 then created = math.floor(now / 1000) end
      local seq = redis.call('INCR', K .. ':seq')
      redis.call('HSET', K .. ':index', fp, q)
      set_record(q, fp, nxt, nxt, seq, created, prio)
      redis.call('HSET', K .. ':l:' .. q, fp, url)
      if metadata ~= '' then redis.call('HSET', K .. ':m:' .. q, fp, metadata) end
      local t = qget(q) or {-1, 0, 0, 0, 0, 0}
      if nxt > 0 then
        schedule(q, fp, nxt, seq, prio, now)
        t[5] = t[5] + 1
      else
        t[4] = t[4] + 1
      end
      qset(q, t)
      out[#out + 1] = 1
    end
  end
  return out
end

-- args: K, queue, now (ms), held until (ms), max URLs in flight, default delay (ms)
local function uf_lease(args)
  local q, now, hold_until = args[2], tonumber(args[3]), tonumber(args[4])
  local max_urls, default_delay = tonumber(args[5]), tonumber(args[6])
  local t = qget(q)
  if not t or t[5] == 0 or now < t[2] then return {} end
  if t[3] > 0 and t[4] >= t[3] then return {} end
  local delay = default_delay
  if t[1] >= 0 then delay = t[1] * 1000 end
  if now < t[6] + delay then return {} end
  local busy = 0
  for _, v in ipairs(redis.call('HVALS', K .. ':h:' .. q)) do
    if tonumber(v) > now then busy = busy + 1 end
  end
  if busy >= max_urls then return {} end
  -- the URLs due by now move to the ready set (a leased URL's record keeps the due date it was served at: its
  -- ready member is rebuilt here from its waiting score)
  local waiting = redis.call('ZRANGEBYSCORE', K .. ':s:' .. q, '-inf', now, 'WITHSCORES')
  for i = 1, #waiting, 2 do
    local member, due = waiting[i], tonumber(waiting[i + 1])
    local fp = string.sub(member, 17)
    local nxt, was, seq, created, prio = record(q, fp)
    if was ~= due then set_record(q, fp, nxt, due, seq, created, prio) end
    redis.call('ZREM', K .. ':s:' .. q, member)
    schedule(q, fp, due, seq, prio, now)
  end
  local due = redis.call('ZRANGE', K .. ':r:' .. q, 0, max_urls - busy - 1)
  local out = {}
  for _, member in ipairs(due) do
    local fp = string.sub(member, 33)
    redis.call('ZREM', K .. ':r:' .. q, member)
    redis.call('ZADD', K .. ':s:' .. q, hold_until, string.sub(member, 17))
    redis.call('HSET', K .. ':h:' .. q, fp, args[4])
    out[#out + 1] = redis.call('HGET', K .. ':l:' .. q, fp)
    out[#out + 1] = redis.call('HGET', K .. ':m:' .. q, fp) or ''
  end
  if #due > 0 then
    t[6] = now
    qset(q, t)
  end
  return out
end

-- args: K, queue, then delay (s), blocked until (ms), limit ('' leaves one as it is)
local function uf_update(args)
  local t = qget(args[2])
  if not t then return 0 end
  if args[3] ~= '' then t[1] = tonumber(args[3]) end
  if args[4] ~= '' then t[2] = tonumber(args[4]) end
  if args[5] ~= '' then t[3] = tonumber(args[5]) end
  qset(args[2], t)
  return 1
end

-- args: K, queue. Returns the URLs it had in flight, -1 if there was no such queue
local function uf_delete_queue(args)
  local q = args[2]
  local t = qget(q)
  if not t then return -1 end
  for _, fp in ipairs(redis.call('HKEYS', K .. ':u:' .. q)) do redis.call('HDEL', K .. ':index', fp) end
  for _, s in ipairs({':u:', ':l:', ':m:', ':h:', ':s:', ':r:'}) do redis.call('DEL', K .. s .. q) end
  redis.call('HDEL', K .. ':queues', q)
  return t[5]
end

-- args: K, queue, created before (the records' created field)
local function uf_purge(args)
  local q, before = args[2], tonumber(args[3])
  local n = 0
  local all = redis.call('HGETALL', K .. ':u:' .. q)
  for i = 1, #all, 2 do
    local created = tonumber(string.match(all[i + 1], '%d+ %d+ %d+ (%d+)'))
    if created < before then
      remove(q, all[i])
      redis.call('HDEL', K .. ':index', all[i])
      n = n + 1
    end
  end
  return n
end

-- the crawl's seen-set and counter, once its queues are deleted
local function uf_drop_seen()
  local m = tonumber(redis.call('HGET', K .. ':seen', 'm')) or 0
  for h = 0, m - 1 do redis.call('DEL', K .. ':seen:' .. h) end
  redis.call('DEL', K .. ':seen', K .. ':seq')
  return m
end

-- (no standard library while the library loads: no pairs() here)
local function register(name, fn)
  redis.register_function('frontier_uf_' .. name, function(_, args)
    bind()
    K = args[1]
    return fn(args)
  end)
end
register('put', uf_put)
register('lease', uf_lease)
register('update', uf_update)
register('delete_queue', uf_delete_queue)
register('purge', uf_purge)
register('drop_seen', uf_drop_seen)
redis.register_function{function_name = 'frontier_uf_' .. 'version', flags = {'no-writes'},
  callback = function() return VERSION end}
