-- A commit step: its preconditions, all checked before its first write, then its writes.
-- Local functions: count, number, check_link, check_commit, commit(B, now, args).
--- @include "state/lua/crawl_call"

-- args: context, load, allocator, fps, #links, links..., #forced, forced fps, forced..., #acks, acks...,
-- #states, (host, bytes)..., #recrawl, recrawl link indexes..., #rescore, rescores... Returns {flags, entries
-- moved by the rescores, pages ended without a fetch, stale key, ...}.
-- Every precondition of a commit, checked before its first write (Redis keeps a script's writes up to an
-- error): the counts, the link and forced records (as add_links reads them), the fingerprints (seen_add's
-- parse), the ack headers (as apply_acks reads them), the recrawl indexes and the rescore records.
local function count(x)
  local n = tonumber(x)
  if not n or n < 0 or n ~= floor(n) then fail('malformed count') end
  return n
end

local function number(x, what)
  if not tonumber(x) then fail('malformed ' .. what) end
end

local function check_link(record)
  local l = fields(record, 9)
  number(l[1], 'link position')
  number(l[6], 'link priority')
  if l[7] ~= '' then number(l[7], 'payload length') end
  if not find(sub(l[9], (tonumber(l[7]) or 0) + 1), ':', 1, true) then fail('malformed link URL') end
end

local function check_commit(L, args, acks_at, nacks, states, rescores)
  if #L.fps ~= 8 * #L.records or #L.forced_fps ~= 8 * #L.forced then fail('fingerprints and links differ') end
  if #L.records > 0 then parse(L.fps) end
  for _, record in ipairs(L.records) do check_link(record) end
  for _, record in ipairs(L.forced) do check_link(record) end
  for i = acks_at, acks_at + 2 * nacks - 1, 2 do
    local a = fields(args[i] or fail('missing ack'), 11)  -- as crawl_acks reads them, so a bad one fails here
    if a[1] ~= 'p' and a[1] ~= 'r' then fail('malformed ack kind') end
    for _, j in ipairs({5, 6, 8, 9}) do number(a[j], 'ack time') end
    number(a[10], 'ack backoff')
    if not args[i + 1] then fail('missing ack text') end
    if a[1] == 'p' and args[i + 1] ~= '' then check_revisit(args[i + 1]) end
  end
  for i = 1, #states do if not states[i] then fail('missing host state') end end
  for _, i in ipairs(L.recrawl) do
    if not i or i < 1 or i > #L.records then fail('malformed recrawl index') end
  end
  for _, record in ipairs(rescores) do number(fields(record, 4)[3], 'rescore priority') end
end

local function commit(B, now, args)
  local cache = {}
  local L = {fps = args[4] or '', records = {}, forced = {}, recrawl = {}}
  local nlinks = count(args[5])
  for i = 1, nlinks do L.records[i] = args[5 + i] end
  local at = 6 + nlinks
  local nforced = count(args[at])
  L.forced_fps = args[at + 1] or ''
  for i = 1, nforced do L.forced[i] = args[at + 1 + i] end
  at = at + 2 + nforced
  local nacks = count(args[at])
  local acks_at = at + 1
  at = at + 2 * nacks + 1
  local states = {}
  for i = at + 1, at + 2 * count(args[at]) do states[#states + 1] = args[i] or false end
  at = at + 2 * count(args[at]) + 1
  for i = at + 1, at + count(args[at] or 0) do L.recrawl[#L.recrawl + 1] = tonumber(args[i]) or false end
  at = at + count(args[at] or 0) + 1
  local rescores = {}
  for i = at + 1, at + count(args[at] or 0) do rescores[#rescores + 1] = args[i] end
  local load, jemalloc = tonumber(args[2]), args[3] == 'jemalloc'
  check_commit(L, args, acks_at, nacks, states, rescores)
  if #rescores > 0 and nlinks > 0 then seen_add(B .. ':seen', L.fps, load, jemalloc, true) end  -- a full chunk
  local moved = rescore(B, cache, rescores)  -- before the links: it moves only URLs queued before this call
  local flags = add_links(B, cache, L, load, jemalloc, now)
  local out = apply_acks(B, cache, args, acks_at, nacks, now)
  for i = 1, #states, 2 do
    if states[i + 1] == '' then
      redis.call('HDEL', B .. ':ts', states[i])
    else
      redis.call('HSET', B .. ':ts', states[i], states[i + 1])
    end
  end
  save_all(B, cache, now)
  table.insert(out, 1, moved)
  table.insert(out, 1, flags)
  return out
end
