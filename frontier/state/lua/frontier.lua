-- frontier's Functions library (FUNCTION LOAD; frontier.state.redis_lua joins the included files and
-- heads the text with `#!lua name=frontier` and VERSION, the digest of the joined text).
-- Every crawl function: KEYS[1] = B:c, the slot group's counters (see crawl_context; frontier_budget: the
-- budget hash); ARGV as each says.
-- frontier_seen_has / frontier_seen_add: KEYS[1] = the group's seen-set hash; ARGV[1] = packed
-- fingerprints (8 bytes each, sorted, unique), then (add) load and allocator ('jemalloc' or other).
--- @include "state/lua/seen"
--- @include "state/lua/crawl_commit"

-- args: group, context, n, budget. A repeat gets the call's leases that have not ended since.
redis.register_function{function_name = 'frontier_lease',
  callback = function(keys, args)
    local B, now = crawl_call(keys, args, 2)
    local again = replayed(B)
    if again then
      local out = {again[1]}
      for i = 2, #again do
        local data = redis.call('HGET', B .. ':L', again[i])
        if data then
          out[#out + 1] = again[i]
          out[#out + 1] = data
        end
      end
      return out
    end
    local out = lease(B, args[1], now, tonumber(args[3]), tonumber(args[4]))
    local keys_only = {out[1]}
    for i = 2, #out, 2 do keys_only[#keys_only + 1] = out[i] end
    return remember(B, now, keys_only, out)
  end}

redis.register_function{function_name = 'frontier_commit',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return commit(B, now, args) end)
  end}

-- args: mode, context, limit
redis.register_function{function_name = 'frontier_end',
  callback = function(keys, args)
    return once(keys, args, 2, function(B, now) return end_leases(B, args[1], now, tonumber(args[3])) end)
  end}

-- args: context. The rank of the group's best ready host: {robots.txt due (0) or not (1), turn end, best
-- priority as a string}, or {} if none is ready: the caller asks the best ranked groups first.
redis.register_function{function_name = 'frontier_rank', flags = {'no-writes'},
  callback = function(keys, args)
    local B, now = crawl_call(keys, args, 1)
    local top = ranked_hosts(B, now, 1)[1]
    if not top then return {} end
    return {top.due, top.tend, tostring(top.best)}
  end}

-- args: context, limit (revisits: queue_due)
redis.register_function{function_name = 'frontier_due',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return queue_due(B, now, tonumber(args[2])) end)
  end}

-- args: context
redis.register_function{function_name = 'frontier_rerun',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return rerun(B, now) end)
  end}

-- args: context. The hosts let go from waiting for their queue group (the crawl's queue_by changed).
redis.register_function{function_name = 'frontier_regroup',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return regroup(B, now) end)
  end}

-- args: context, then host, its group key, ...: the hosts' stored group keys (queue_by domain; crawl_end's
-- store_groups).
redis.register_function{function_name = 'frontier_store_groups',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return store_groups(B, args, 2, now) end)
  end}

-- KEYS[1]: the budget hash: epoch (the crawl's, as every group's) and used (pages fetched or leased). args: delta
-- (> 0: reserve up to delta of max pages; < 0: give back), max, the crawl's epoch. Returns what was reserved.
redis.register_function{function_name = 'frontier_budget',
  callback = function(keys, args)
    local delta, cap = tonumber(args[1]), tonumber(args[2])
    local v = redis.call('HMGET', keys[1], 'epoch', 'used')
    if v[1] ~= args[3] then
      fail('the crawl state is gone from the server (' .. keys[1] .. ' lacks epoch ' .. tostring(args[3]) ..
           '): it was restarted empty, flushed, or evicted keys')
    end
    local used = tonumber(v[2]) or 0
    if delta > 0 then delta = math.max(0, math.min(delta, cap - used)) end
    if delta ~= 0 then redis.call('HINCRBY', keys[1], 'used', delta) end
    return delta
  end}

redis.register_function{function_name = 'frontier_version', flags = {'no-writes'},
  callback = function() return VERSION end}

redis.register_function{function_name = 'frontier_seen_has', flags = {'no-writes'},
  callback = function(keys, args)
    bind()
    return seen_has(keys[1], args[1])
  end}

redis.register_function{function_name = 'frontier_seen_add',
  callback = function(keys, args)
    bind()
    local load = tonumber(args[2])
    if not load or load < 1 then fail('load must be a number >= 1') end
    return seen_add(keys[1], args[1], load, args[3] == 'jemalloc')
  end}
