-- A host's state (B:h:<host>), read once per call into a cache and written back at its end.
-- Local functions: host_get, host_delay, robots_due, low_slots, reready, host_save, save_all.
--- @include "state/lua/crawl_context"

local HOST_FIELDS = {'queued', 'inflight', 'held', 'fetched', 'delay', 'next', 'pause', 'robots_at', 'gate',
                     'rfail', 'scheme', 'lowq', 'lowin', 'lowused', 'turn', 'tend', 'lowheld', 'bo', 'addr', 'grp'}

local function host_get(B, cache, host)
  local h = cache[host]
  if h then return h end
  local v = redis.call('HMGET', B .. ':h:' .. host, unpack(HOST_FIELDS))
  h = {name = host, queued = tonumber(v[1]) or 0, inflight = tonumber(v[2]) or 0, held = tonumber(v[3]) or 0,
       fetched = tonumber(v[4]) or 0, delay = tonumber(v[5]), next = tonumber(v[6]) or 0,
       pause = tonumber(v[7]) or 0, robots_at = tonumber(v[8]), gate = v[9] or '', rfail = tonumber(v[10]) or 0,
       scheme = v[11] or nil, lowq = tonumber(v[12]) or 0, lowin = tonumber(v[13]) or 0,
       lowused = tonumber(v[14]) or 0, turn = tonumber(v[15]) or 0, tend = tonumber(v[16]) or 0,
       lowheld = tonumber(v[17]) or 0, bo = tonumber(v[18]) or 0, addr = v[19] or '',
       grp = v[20] or ''}
  cache[host] = h
  cache[#cache + 1] = h
  return h
end

local function host_delay(h) return h.delay or P.delay end

local function robots_due(h, now)
  return P.obey and not (h.robots_at and h.robots_at + P.ttl > now)
end

-- How many more of the host's low entries its max_suspect_pages budget lets be leased.
local function low_slots(h)
  local waiting = h.lowq - h.lowin - h.lowheld
  if P.msp < 0 then return waiting end
  return math.min(waiting, P.msp - h.lowused - h.lowin)
end

-- Is the host leasable (a robots.txt or a page) at some time? Puts it in B:ready at that time, or takes it out.
local function reready(B, h, now)
  local normal = (h.queued - h.lowq) - (h.inflight - h.lowin) - (h.held - h.lowheld)
  local ok = h.gate == '' and (normal > 0 or low_slots(h) > 0)
  if ok and not robots_due(h, now) then
    local cap = host_delay(h) > 0 and 1 or P.mph
    ok = h.inflight < cap and (P.mpph < 0 or h.fetched + h.inflight < P.mpph)
  end
  if ok then
    redis.call('ZADD', B .. ':ready', max(h.next, h.pause), h.name)
  else
    redis.call('ZREM', B .. ':ready', h.name)
  end
end

local function host_save(B, h, now)
  local args = {'queued', h.queued, 'inflight', h.inflight, 'held', h.held, 'fetched', h.fetched, 'next', h.next,
                'pause', h.pause, 'gate', h.gate, 'rfail', h.rfail, 'lowq', h.lowq, 'lowin', h.lowin,
                'lowused', h.lowused, 'turn', h.turn, 'tend', h.tend, 'lowheld', h.lowheld, 'bo', h.bo}
  if h.delay then args[#args + 1] = 'delay'; args[#args + 1] = h.delay end
  if h.robots_at then args[#args + 1] = 'robots_at'; args[#args + 1] = h.robots_at end
  if h.addr ~= '' then args[#args + 1] = 'addr'; args[#args + 1] = h.addr end
  if h.grp ~= '' then args[#args + 1] = 'grp'; args[#args + 1] = h.grp end
  redis.call('HSET', B .. ':h:' .. h.name, unpack(args))
  reready(B, h, now)
end

local function save_all(B, cache, now)
  for i = 1, #cache do host_save(B, cache[i], now) end
end
