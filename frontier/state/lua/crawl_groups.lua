-- Queue groups by server address or registered domain (politeness.queue_by ip or domain, a single node: a group's
-- hosts lie in any slot group).
-- Local functions: group_of, take_group, group_get, group_cap, host_has_work, group_wait, group_wake, group_result.
--- @include "state/lua/crawl_queue"

-- A group's keys (P.gpre .. address, outside every slot group's hash tag):
--   G             hash: inflight (leases of its hosts, robots.txt ones included), next (its last result + that
--                 host's delay), pause (Retry-After or backoff), bo (its backoff level)
--   G:w           zset B NUL host -> when it began to wait: its hosts whose time came while it was at its cap
--                 (their gate is 'gwait', so they are in no B:ready); an ended lease lets the first one go
-- A host's group: under ip, its address (B:h:<host> addr, from its first result that named one), or its name (an
-- IP literal: that address) until then; under domain, the registered domain its first link's commit named
-- (B:h:<host> grp: the Public Suffix List is the caller's, frontier.url.groups), or its name if it has none; nil
-- under queue_by host, where each host's own record does all this.

local function group_of(h)
  if P.qby == 'domain' then return h.grp ~= '' and h.grp or h.name end
  if P.qby ~= 'ip' then return nil end
  if h.addr ~= '' then return h.addr end
  return string.match(h.name, '^%[(.*)%]') or string.match(h.name, '^([%d%.]+):?%d*$') or h.name
end

-- A host without a stored group key (created under another queue_by) takes up `key` when nothing of it is in
-- flight or waiting for its group, so no lease is counted into one group and out of another.
local function take_group(h, key)
  if key ~= '' and h.grp == '' and h.inflight == 0 and h.gate ~= 'leased' and h.gate ~= 'gwait' then h.grp = key end
end

local function group_get(key)
  local v = redis.call('HMGET', P.gpre .. key, 'inflight', 'next', 'pause', 'bo')
  return {key = P.gpre .. key, inflight = tonumber(v[1]) or 0, next = tonumber(v[2]) or 0,
          pause = tonumber(v[3]) or 0, bo = tonumber(v[4]) or 0}
end

local function group_cap() return P.delay > 0 and 1 or P.mph end

local function host_has_work(h)
  return (h.queued - h.lowq) - (h.inflight - h.lowin) - (h.held - h.lowheld) > 0 or low_slots(h) > 0
end

local function group_wait(B, h, g, now)
  h.gate = 'gwait'
  redis.call('ZADD', g.key .. ':w', 'NX', now, B .. SEP .. h.name)
end

-- One lease of the group ended: if that leaves a place, its first waiting host with work goes back to its slot
-- group's ready set (the current call's `cache` holds the hosts of slot group B).
local function group_wake(B, cache, key, now)
  local g = group_get(key)
  if g.inflight >= group_cap() then return end
  while true do
    local first = redis.call('ZPOPMIN', g.key .. ':w')
    if #first == 0 then return end
    local at = find(first[1], SEP, 1, true)
    local b, name = sub(first[1], 1, at - 1), sub(first[1], at + 1)
    local h = host_get(b, b == B and cache or {}, name)
    h.gate = ''
    if b ~= B then host_save(b, h, now) end  -- B's hosts are saved with the call's cache
    if host_has_work(h) then return end
  end
end

-- A result of one of the group's hosts: its next time, pause and backoff (as crawl_acks's backoff does for a host).
local MAX_LEVEL = 32  -- backoff levels counted at most (the pause is capped long before)
local function group_result(key, now, delay, pause, jitter, fetched)
  local g = group_get(key)
  if jitter > 0 then
    g.bo = math.min(g.bo + 1, MAX_LEVEL)
    pause = max(pause, now + math.min(2 ^ (g.bo - 1), P.bomax) * jitter)
  elseif fetched and g.bo > 0 then
    g.bo = g.bo - 1
  end
  redis.call('HSET', g.key, 'next', max(g.next, now + delay), 'bo', g.bo, 'pause', max(g.pause, pause))
end
