-- Revisits: the schedules of fetched URLs (B:rv) and their due times (B:due).
-- Local functions: check_revisit, store_revisit, revisit_url, queue_due.
--- @include "state/lua/crawl_lease"

-- == Revisits (StatePolicy.revisit) ==
--   B:rv    hash fingerprint (8 bytes) -> the URL's schedule, frontier.state.crawlstore.encode_revisit's bytes
--           (version 2): an 8-byte tag, due, interval, changed_at, captured_at (f64 LE each), depth (u32 LE), digest
--           (8 bytes), the ETag's and the Last-Modified's lengths (u16 LE each), visits, changes (f32 LE each),
--           seconds (f64 LE), then the ETag, the Last-Modified and the URL
--   B:due   zset fingerprint -> when the URL is due again (the server's clock): one member per URL not queued again yet
-- A DONE ack that carries a schedule stores it, and the URL's done time (B:done), in the ack's step; queue_due queues
-- the due URLs that are done, so a URL queued or leased already (a recrawl) is never queued twice.
local REVISIT_HEAD = 72  -- bytes before a schedule's ETag (crawlstore._REVISIT, version 2)

-- A DONE ack's schedule, as the caller sends it: due NUL fingerprint (8 bytes) then the schedule's bytes.
-- Checked by check_commit before the step's first write.
local function check_revisit(text)
  local p = find(text, SEP, 1, true)
  if not p or #text < p + 8 + REVISIT_HEAD or not tonumber(sub(text, 1, p - 1)) then
    fail('malformed revisit schedule')
  end
  return p
end

local function store_revisit(B, text, now)
  local p = check_revisit(text)
  local fp = sub(text, p + 1, p + 8)
  redis.call('HSET', B .. ':rv', fp, sub(text, p + 9))
  redis.call('ZADD', B .. ':due', tonumber(sub(text, 1, p - 1)), fp)
  redis.call('HSET', B .. ':done', fp, spack('>d', now))
end

-- The depth and URL of a stored schedule, and the URL's host (frontier.url.canonical.url_host).
local function revisit_url(record)
  local d1, d2, d3, d4 = byte(record, 41, 44)
  local e1, e2, m1, m2 = byte(record, 53, 56)
  local url = sub(record, REVISIT_HEAD + 1 + e1 + 256 * e2 + m1 + 256 * m2)
  local start = find(url, '://', 1, true) + 3
  local slash = find(url, '/', start, true)
  return d1 + 256 * (d2 + 256 * (d3 + 256 * d4)), url, sub(url, start, slash and slash - 1 or #url)
end

-- Up to `limit` of the group's URLs due by now, earliest first: each one done is queued again (priority 0, its
-- entry carrying its fingerprint: its end records its done time) in the step that takes its due entry; one queued
-- already is left alone (its fetch stores its next schedule). Returns {URLs queued, due entries taken}.
local function queue_due(B, now, limit)
  local fps = redis.call('ZRANGEBYSCORE', B .. ':due', '-inf', now, 'LIMIT', 0, limit)
  local cache, queued = {}, 0
  for _, fp in ipairs(fps) do
    redis.call('ZREM', B .. ':due', fp)
    local record = redis.call('HGET', B .. ':rv', fp)
    if record and redis.call('HDEL', B .. ':done', fp) == 1 then
      local depth, url, host = revisit_url(record)
      push(B, host_get(B, cache, host), fp, false, 0, depth, 0, 0, 0, '', url)
      queued = queued + 1
    end
  end
  save_all(B, cache, now)
  return {queued, #fps}
end
