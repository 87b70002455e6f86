-- A commit's parts: results (acks), new links, requeued seen URLs, re-scores.
-- Local functions: apply_acks, queued_urls, call_parts, requeue_seen, add_links, rescore.
--- @include "state/lua/crawl_revisit"

-- Page and robots.txt results. acks: 2 per ack: header (kind NUL key NUL outcome NUL fetched NUL not_before
-- NUL pause_until NUL reason NUL delay NUL fetched_at) and the robots.txt text (a page's: its revisit schedule,
-- store_revisit, or '').
-- Returns {pages ended without a fetch, stale key, ...}.
local function apply_acks(B, cache, acks, first, n, now)
  local out, released = {0}, 0
  for i = first, first + 2 * n - 1, 2 do
    local a = fields(acks[i], 9)
    local key, outcome = a[2], a[3]
    local data = redis.call('HGET', B .. ':L', key)
    -- only this instance's lease of the same kind: anything else is stale (never another URL's lease)
    if not data or sub(data, 1, #P.inst + 1) ~= P.inst .. SEP or fields(data, 4)[3] ~= a[1] then
      out[#out + 1] = key
    else
      local d, h = end_lease(B, cache, key, data)
      local pause = on_server(a[6])
      if pause > h.pause then h.pause = pause end
      if d[3] == 'r' then
        if outcome ~= 'ok' then h.rfail = h.rfail + 1 end
        if outcome == 'ok' then
          redis.call('SET', B .. ':r:' .. h.name, acks[i + 1])
          h.robots_at = on_server(a[9])
        elseif outcome == 'retry' then
          h.next = on_server(a[5])
        elseif outcome == 'unreachable' then
          h.gate = 'unreach'
          if redis.call('HSET', B .. ':unr', h.name, a[7]) == 1 then redis.call('HINCRBY', B .. ':c', 'unreach', 1) end
        else  -- disallow: no text stored, the crawl refuses every page; fresh for robots_ttl
          redis.call('DEL', B .. ':r:' .. h.name)
          h.robots_at = now
        end
        h.delay = tonumber(a[8])
        h.next = max(h.next, now + h.delay)
      else
        local e, fp = entry_fields(d[5], h.name)
        local low = is_low(d[5])
        local priority = dequeue(B, h, d[5])
        if outcome == 'drop' or outcome == 'done' then finished(B, fp, now) end
        if outcome == 'done' and acks[i + 1] ~= '' then store_revisit(B, acks[i + 1], now) end  -- revisits
        if low and outcome ~= 'drop' and outcome ~= 'low' and outcome ~= 'park' and outcome ~= 'wait' then
          h.lowused = h.lowused + 1
        end
        if outcome == 'drop' then
          released = released + 1
        elseif outcome == 'low' then  -- moved to the host's low queue unfetched: no attempt
          push(B, h, fp, true, priority, e[2], e[3], e[4], 0, e[6], e[7])
          released = released + 1
        elseif outcome == 'wait' then  -- a blocked host's: back in its band, no attempt; h.pause holds the host
          push(B, h, fp, low, priority, e[2], e[3], e[4], 0, e[6], e[7])
          released = released + 1
        elseif outcome == 'park' then  -- a trap pattern past its budget: held in its band for this run
          local entry = push(B, h, fp, low, priority, e[2], e[3], e[4], 0, e[6], e[7])
          redis.call('ZADD', seg_key(B, h.name, seg_name(entry)), PARK - priority, entry)  -- to the tail
          reindex(B, h.name, seg_name(entry))
          redis.call('HSET', B .. ':held', h.name .. SEP .. entry, PARKED)
          h.held = h.held + 1
          if low then h.lowheld = h.lowheld + 1 end
          released = released + 1
        else
          redis.call('HINCRBY', B .. ':c', 'attempts', 1)
          if a[4] == '1' then
            h.fetched = h.fetched + 1
            redis.call('HINCRBY', B .. ':c', 'fetched', 1)
          else
            released = released + 1
          end
          if outcome == 'retry' then
            push(B, h, fp, low, priority, e[2], e[3] + 1, e[4], string.format('%.17g', on_server(a[5])), e[6], e[7])
          elseif outcome == 'hold' then
            local entry = push(B, h, fp, low, priority, e[2], 0, e[4], 0, e[6], e[7])
            redis.call('HSET', B .. ':held', h.name .. SEP .. entry, a[7])
            h.held = h.held + 1
          end
          h.next = max(h.next, now + host_delay(h))
        end
      end
    end
  end
  out[1] = released
  return out
end

-- The URLs in a host's queue (leased ones included) -> their entry, for a recrawl or a re-score: read once per
-- host and call.
local function queued_urls(B, cache, host)
  local key = 'urls' .. SEP .. host
  local urls = cache[key]
  if urls then return urls end
  urls = {}
  local order = {}  -- a URL queued twice (a forced link): its last entry in the queue's order
  for _, q in ipairs(queue_all(B, host)) do
    local e = entry_fields(q.entry, host)
    local url = sub(e[7], (tonumber(e[6]) or 0) + 1)
    if not order[url] or before(order[url], q) then urls[url], order[url] = q.entry, q end
  end
  cache[key] = urls
  return urls
end

-- redis.call(command, key, items...) in parts (Lua's unpack has a limit); the replies joined.
local function call_parts(command, key, items)
  local out = {}
  for at = 1, #items, 1000 do
    local reply = redis.call(command, key, unpack(items, at, math.min(#items, at + 999)))
    if type(reply) == 'table' then for j = 1, #reply do out[#out + 1] = reply[j] end end
  end
  return out
end

-- The seen links queued again (out[i] set to '1'): a recrawl link (rec[i]) of a URL not queued now, and with
-- recrawl_after any link to a URL done longer ago than that. A done time tells a URL no longer queued without
-- reading its host's queue; it is deleted with the requeue, so further links leave the URL alone.
local function requeue_seen(B, cache, fps, records, out, rec, now)
  local want, probe = {}, {}
  for i = 1, #out do
    if out[i] == '0' and (P.after or rec[i]) then
      want[#want + 1] = i
      probe[#probe + 1] = sub(fps, 8 * i - 7, 8 * i)
    end
  end
  if #want == 0 then return end
  local times, again = call_parts('HMGET', B .. ':done', probe), {}
  for j, i in ipairs(want) do
    if times[j] then
      if rec[i] or sunpack('>d', times[j]) + P.after <= now then
        out[i] = '1'
        again[#again + 1] = probe[j]
      end
    elseif rec[i] then
      local l = fields(records[i], 8)
      if not queued_urls(B, cache, l[2])[sub(l[8], (tonumber(l[7]) or 0) + 1)] then out[i] = '1' end
    end
  end
  call_parts('HDEL', B .. ':done', again)
end

-- L: the links, L.fps packed fingerprints (sorted, unique) and L.records one record per fingerprint; L.forced:
-- records queued without the seen-set, L.forced_fps their fingerprints; L.recrawl: the indexes (1-based, among
-- the links) of recrawl links, queued again when seen but not queued now. record = position in the batch NUL
-- host NUL depth NUL redirects NUL low ('1': the host's low queue) NUL priority NUL payload length NUL payload
-- bytes then the URL. Returns the flags: "1" new (or queued again), "0" not queued.
local function add_links(B, cache, L, load, jemalloc, now)
  local flags, new, n = '', {}, #L.records
  if n > 0 then flags = seen_add(B .. ':seen', L.fps, load, jemalloc) end
  if P.after or #L.recrawl > 0 then
    local out, rec = {}, {}
    for i = 1, n do out[i] = sub(flags, i, i) end
    for _, i in ipairs(L.recrawl) do rec[i] = true end
    requeue_seen(B, cache, L.fps, L.records, out, rec, now)
    flags = concat(out)
  end
  local function keep(fps, i) return P.after and sub(fps, 8 * i - 7, 8 * i) or nil end
  for i = 1, n do
    if byte(flags, i) == 49 then
      local l = fields(L.records[i], 8)
      l.fp = keep(L.fps, i)
      new[#new + 1] = l
    end
  end
  local forced_fps = {}
  for i = 1, #L.forced do
    local l = fields(L.forced[i], 8)
    l.fp = keep(L.forced_fps, i)
    new[#new + 1] = l
    forced_fps[i] = sub(L.forced_fps, 8 * i - 7, 8 * i)
  end
  call_parts('HDEL', B .. ':done', forced_fps)  -- a forced link queues the URL: no longer done
  for _, l in ipairs(new) do l[0] = tonumber(l[1]) end
  table.sort(new, function(x, y) return x[0] < y[0] end)  -- queued in the order of the batch
  for _, l in ipairs(new) do
    local host, tail = l[2], l[8]
    local h = host_get(B, cache, host)
    if redis.call('SADD', B .. ':hosts', host) == 1 then
      redis.call('HINCRBY', B .. ':c', 'hosts', 1)
      local url = sub(tail, (tonumber(l[7]) or 0) + 1)
      h.scheme = sub(url, 1, find(url, ':', 1, true) - 1)
      redis.call('HSET', B .. ':h:' .. host, 'scheme', h.scheme)
    end
    push(B, h, l.fp, l[5] == '1', tonumber(l[6]), l[3], 0, l[4], 0, l[7], tail)
  end
  return flags
end

-- Re-scores: records host NUL add ('1': added to the present priority) NUL priority NUL URL. Each URL queued,
-- and neither leased nor held, moves to its new priority (a new sequence: behind its equals). Returns how many
-- moved.
local function rescore(B, cache, records)
  local moved = 0
  for _, record in ipairs(records) do
    local r = fields(record, 4)
    local host, url = r[1], r[4]
    local urls = queued_urls(B, cache, host)
    local entry = urls[url]
    if entry and redis.call('HEXISTS', B .. ':q:' .. host .. ':lq', entry) == 0
        and redis.call('HEXISTS', B .. ':held', host .. SEP .. entry) == 0 then
      local old = priority_of(entry, tonumber(redis.call('ZSCORE', seg_key(B, host, seg_name(entry)), entry)))
      local priority = r[2] == '1' and old + tonumber(r[3]) or tonumber(r[3])
      priority = math.min(math.max(priority, -PRIORITY_LIMIT), PRIORITY_LIMIT)
      if priority ~= old then
        local new = resequence(B, host_get(B, cache, host), entry)
        seg_remove(B, host, entry)
        seg_add(B, host, score_of(is_low(entry), priority), new)
        urls[url] = new
        moved = moved + 1
      end
    end
  end
  return moved
end
