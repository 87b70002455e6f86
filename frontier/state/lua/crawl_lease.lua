-- Leases (B:leases, B:L): their data and keys, the ranking of ready hosts, a group's lease step.
-- Local functions: lease_data, new_lease, end_lease, finished, best_of, ranked_hosts, lease.
--- @include "state/lua/crawl_groups"

-- lease = instance NUL host NUL kind ('p' page, 'r' robots.txt) NUL priority NUL entry
local function lease_data(kind, host, entry, priority)
  return concat({P.inst, host, kind, priority or 0, entry}, SEP)
end

-- A lease key is unique forever: the call's request id (the instance's id and its own counter) and a
-- number within the call, never a server counter that a failover or an older RDB could roll back.
local function new_lease(B, g, data, now)
  P.leases = P.leases + 1
  local key = g .. ':' .. P.rid .. '.' .. P.leases
  redis.call('HSET', B .. ':L', key, data)
  redis.call('ZADD', B .. ':leases', now + P.timeout, key)
  redis.call('HINCRBY', B .. ':c', 'inflight', 1)
  return key
end

-- The lease `key` (its data `data`) ends: returns its fields (instance, host, kind, priority, entry) and the host.
-- Its queue group (queue_by ip) counts it out and lets a waiting host go.
local function end_lease(B, cache, key, data, now)
  local d = fields(data, 5)
  redis.call('ZREM', B .. ':leases', key)
  redis.call('HDEL', B .. ':L', key)
  redis.call('HINCRBY', B .. ':c', 'inflight', -1)
  local h = host_get(B, cache, d[2])
  if d[3] == 'r' then
    h.gate = ''
  else
    redis.call('HDEL', B .. ':q:' .. h.name .. ':lq', d[5])
    h.inflight = h.inflight - 1
    if is_low(d[5]) then h.lowin = h.lowin - 1 end
  end
  local gk = group_of(h)
  if gk then
    redis.call('HINCRBY', P.gpre .. gk, 'inflight', -1)
    group_wake(B, cache, gk, now)
  end
  return d, h
end

-- A URL left the queue for good (done, refused or given up): its done time, if its entry carries its fingerprint.
local function finished(B, fp, now)
  if fp then redis.call('HSET', B .. ':done', fp, spack('>d', now)) end
end

-- The priority of a host's best entry that is neither leased nor held (-inf: none among its first ones).
local function best_of(B, h)
  local lq = B .. ':q:' .. h.name .. ':lq'
  for _, q in ipairs(queue_head(B, h.name, h.inflight + h.held - h.lowheld + 1)) do
    local entry = q.entry
    if is_low(entry) then break end
    if redis.call('HEXISTS', lq, entry) == 0 and redis.call('HEXISTS', B .. ':held', h.name .. SEP .. entry) == 0 then
      return priority_of(entry, q.score)
    end
  end
  return -math.huge
end

-- The group's hosts whose time has come (the RANKED earliest), best ranked first: a robots.txt due first, then
-- hosts within their turn before those whose turn ended (earliest ended first), then by best entry, then time.
local RANKED = 64
local function ranked_hosts(B, now, n)
  local names = redis.call('ZRANGEBYSCORE', B .. ':ready', '-inf', now, 'LIMIT', 0, n + RANKED)
  local hosts, read = {}, {}
  for i, name in ipairs(names) do
    local h = host_get(B, read, name)
    local due = robots_due(h, now)
    hosts[i] = {h = h, due = due and 0 or 1, tend = h.tend, best = due and 0 or best_of(B, h), at = i}
  end
  table.sort(hosts, function(x, y)
    if x.due ~= y.due then return x.due < y.due end
    if x.tend ~= y.tend then return x.tend < y.tend end
    if x.best ~= y.best then return x.best > y.best end
    return x.at < y.at
  end)
  return hosts
end

-- Up to n leases of the group's ready hosts, at most `budget` pages (-1: no limit). Returns
-- {pages, key1, lease1, key2, lease2, ...}, a host's pages in priority order.
local function lease(B, g, now, n, budget)
  local out, jobs, pages, cache = {0}, 0, 0, {}
  for _, ranked in ipairs(ranked_hosts(B, now, n)) do
    if jobs >= n then break end
    local h = ranked.h
    local name = h.name
    cache[name] = h  -- saved at the end
    cache[#cache + 1] = h
    local gk, free = group_of(h), n - jobs
    if gk then  -- its queue group's time and cap first: a host that may not go now waits (see crawl_groups)
      local grp = group_get(gk)
      if max(grp.next, grp.pause) > now then
        h.next, free = max(h.next, grp.next, grp.pause), 0
      elseif grp.inflight >= group_cap() then
        group_wait(B, h, grp, now)
        free = 0
      else
        free = math.min(free, group_cap() - grp.inflight)
      end
    end
    if free > 0 and robots_due(h, now) then
      if h.gate == '' then
        local url = (h.scheme or 'http') .. '://' .. name .. '/robots.txt'
        local data = lease_data('r', name, make_entry(0, name, false, nil, 0, h.rfail, 0, 0, '', url))
        out[#out + 1] = new_lease(B, g, data, now)
        out[#out + 1] = data
        h.gate = 'leased'
        jobs = jobs + 1
        if gk then redis.call('HINCRBY', P.gpre .. gk, 'inflight', 1) end
      end
    elseif free > 0 then
      local slots = math.min((host_delay(h) > 0 and 1 or P.mph) - h.inflight, free)
      if P.mpph >= 0 then slots = math.min(slots, P.mpph - h.fetched - h.inflight) end
      if P.turn >= 0 then slots = math.min(slots, P.turn - h.turn) end
      local by_budget = budget >= 0 and budget - pages < slots
      if by_budget then slots = budget - pages end
      local leased, backoff = 0, nil
      if slots > 0 then
        local lq = B .. ':q:' .. name .. ':lq'
        local low_left = low_slots(h)
        for _, q in ipairs(queue_head(B, name, h.inflight + h.held - h.lowheld + slots + 64)) do
          local entry = q.entry
          if leased >= slots then break end
          local low = is_low(entry)
          if low and low_left <= 0 then break end
          if redis.call('HEXISTS', lq, entry) == 0
              and redis.call('HEXISTS', B .. ':held', name .. SEP .. entry) == 0 then
            local nb = tonumber(entry_fields(entry, name)[5])
            if nb > now then
              backoff = backoff and math.min(backoff, nb) or nb
            else
              local data = lease_data('p', name, entry, priority_of(entry, q.score))
              local key = new_lease(B, g, data, now)
              redis.call('HSET', lq, entry, key)
              if low then h.lowin, low_left = h.lowin + 1, low_left - 1 end
              out[#out + 1] = key
              out[#out + 1] = data
              leased = leased + 1
            end
          end
        end
        h.inflight = h.inflight + leased
        pages, jobs = pages + leased, jobs + leased
        if gk and leased > 0 then redis.call('HINCRBY', P.gpre .. gk, 'inflight', leased) end
        if P.turn >= 0 and leased > 0 then
          h.turn = h.turn + leased
          if h.turn >= P.turn then h.turn, h.tend = 0, redis.call('HINCRBY', B .. ':c', 'turns', 1) end
        end
        if leased == 0 then h.next = max(h.next, backoff or now + 0.05) end
      end
      if by_budget and slots <= 0 then
        cache[name] = nil  -- the crawl-wide budget, not the host, holds it back: it stays ready as it is
        for i = #cache, 1, -1 do if cache[i] == h then table.remove(cache, i) end end
      end
    end
  end
  save_all(B, cache, now)
  out[1] = pages
  return out
end
