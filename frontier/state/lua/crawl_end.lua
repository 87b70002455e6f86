-- Leases that end without a result (expiry, abandon, release), and a rerun of a finished crawl.
-- Local functions: end_leases(B, mode, now, limit), rerun(B, now), regroup(B, now).
--- @include "state/lua/crawl_acks"

-- Leases that ended without a result. mode: 'expire' (deadline <= now, any instance's), 'abandon' (this
-- instance's: an attempt each, as expire) or 'release' (this instance's, closing: back in place, no attempt).
-- Returns {key, lease, requeued ('1' / '0'), ...}.
local function end_leases(B, mode, now, limit)
  local keys
  if mode == 'expire' then
    keys = redis.call('ZRANGEBYSCORE', B .. ':leases', '-inf', now, 'LIMIT', 0, limit)
  else
    keys = redis.call('ZRANGE', B .. ':leases', 0, -1)
  end
  local out, cache = {}, {}
  for _, key in ipairs(keys) do
    local data = redis.call('HGET', B .. ':L', key)
    if data and (mode == 'expire' or sub(data, 1, #P.inst + 1) == P.inst .. SEP) then
      local d, h = end_lease(B, cache, key, data, now)
      local requeued = '0'
      if d[3] == 'p' and mode ~= 'release' then
        local e, fp = entry_fields(d[5], h.name)
        local low = is_low(d[5])
        local priority = dequeue(B, h, d[5])
        redis.call('HINCRBY', B .. ':c', 'attempts', 1)
        if low then h.lowused = h.lowused + 1 end
        if tonumber(e[3]) < P.retries then
          push(B, h, fp, low, priority, e[2], e[3] + 1, e[4], 0, e[6], e[7])
          requeued = '1'
        else
          finished(B, fp, now)
        end
      end
      out[#out + 1] = key
      out[#out + 1] = data
      out[#out + 1] = requeued
    end
  end
  save_all(B, cache, now)
  return out
end

-- A new run of a crawl that is done: hosts and seeds held back as unreachable are tried again.
local function rerun(B, now)
  local cache = {}
  local unr = redis.call('HKEYS', B .. ':unr')
  for _, name in ipairs(unr) do
    local h = host_get(B, cache, name)
    h.gate, h.rfail = '', 0
  end
  local held = redis.call('HKEYS', B .. ':held')
  for _, k in ipairs(held) do
    local p = find(k, SEP, 1, true)
    local h = host_get(B, cache, sub(k, 1, p - 1))
    h.held = h.held - 1
    if is_low(sub(k, p + 1)) then h.lowheld = h.lowheld - 1 end
  end
  redis.call('DEL', B .. ':unr', B .. ':held')
  redis.call('HSET', B .. ':c', 'unreach', 0)
  save_all(B, cache, now)
  return #unr + #held
end

-- args[first..]: host, its group key (queue_by domain: the caller's Public Suffix List), ...: each host without
-- one takes it up (crawl_groups' take_group). Returns how many hosts were read.
local function store_groups(B, args, first, now)
  local cache = {}
  for i = first, #args - 1, 2 do take_group(host_get(B, cache, args[i]), args[i + 1]) end
  save_all(B, cache, now)
  return #cache
end

-- The crawl's queue_by changed: the hosts waiting for a queue group (gate 'gwait') are let go, and their groups
-- are derived afresh (from each host's name and address) by the leases that follow. One read of every host's
-- gate: a run with another queue_by pays it once.
local function regroup(B, now)
  local cache = {}
  for _, name in ipairs(redis.call('SMEMBERS', B .. ':hosts')) do
    if redis.call('HGET', B .. ':h:' .. name, 'gate') == 'gwait' then host_get(B, cache, name).gate = '' end
  end
  save_all(B, cache, now)
  return #cache
end
