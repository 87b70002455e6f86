-- A host's queue: entries, their segments (B:q:<host>:<s>, B:qi:<host>), push and dequeue.
-- Local functions: make_entry, entry_fields, push, dequeue, queue_head, queue_all and what they use.
--- @include "state/lua/crawl_hosts"

local LOW = 2 ^ 50  -- the scores of the low band start here (priorities are within +-1e12)
local PARKED = 'trap_budget'  -- frontier.state.base.PARKED: the reason a parked entry is held for
local RETIRED = 'operator_retired'  -- frontier.state.base.RETIRED: the reason a shelved entry is held for
local PARK = 2 ^ 51  -- a parked low entry's score: PARK - priority, behind every other low entry
local SEQ = 6  -- bytes of an entry's sequence (big-endian: sorts as the number)
local SEG = 128  -- entries of a queue segment at most: zset-max-listpack-entries, so a segment stays a listpack
local FLAGS = 64  -- an entry's flag byte: FLAGS + 1 (low) + 2 (fingerprint) + 4 (http://host) or 8 (https://host)
local PRIORITY_LIMIT = 1e12  -- frontier.state.base.PRIORITY_LIMIT
local function flag_of(entry) return byte(entry, SEQ + 1) - FLAGS end

-- Is a queue entry a low one?
local function is_low(entry)
  return flag_of(entry) % 2 == 1
end

local function seq_of(entry)
  local b1, b2, b3, b4, b5, b6 = byte(entry, 1, SEQ)
  return ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6
end

local function seq_bytes(n)
  local out = {}
  for i = SEQ, 1, -1 do
    out[i] = char(n % 256)
    n = floor(n / 256)
  end
  return concat(out)
end

local function score_of(low, priority) return low and LOW - priority or -priority end

-- The priority of an entry with this score.
local function priority_of(entry, score)
  local p = score > LOW + LOW / 2 and PARK - score or is_low(entry) and LOW - score or -score
  return p == 0 and 0 or p  -- never -0
end

-- A host's queue: segments (zsets B:q:<host>:<name>) and their index (B:qi:<host>: name -> the segment's best score).
local function index_key(B, host) return B .. ':qi:' .. host end
local function seg_key(B, host, name) return B .. ':q:' .. host .. ':' .. name end
local function seg_name(entry) return string.format('%013d', floor(seq_of(entry) / SEG)) end

-- The segment `name` changed: its best score into the index, or the segment out of it when empty.
local function reindex(B, host, name)
  local best = redis.call('ZRANGE', seg_key(B, host, name), 0, 0, 'WITHSCORES')
  if best[1] then
    redis.call('ZADD', index_key(B, host), best[2], name)  -- the score as the server wrote it: exact
  else
    redis.call('ZREM', index_key(B, host), name)
  end
end

-- An entry into its segment; the index moves only if it is the segment's new head (an equal score queued later
-- is not: it sorts after its equals).
local function seg_add(B, host, score, entry)
  local name, ikey = seg_name(entry), index_key(B, host)
  redis.call('ZADD', seg_key(B, host, name), score, entry)
  local best = redis.call('ZSCORE', ikey, name)
  if not best or score < tonumber(best) then redis.call('ZADD', ikey, score, name) end
end

-- Removes an entry from its host's queue; returns its score (nil if it was not queued). The index is read again
-- only if the entry may have been its segment's head.
local function seg_remove(B, host, entry)
  local name = seg_name(entry)
  local key = seg_key(B, host, name)
  local score = redis.call('ZSCORE', key, entry)
  if not score then return nil end
  redis.call('ZREM', key, entry)
  if tonumber(score) <= tonumber(redis.call('ZSCORE', index_key(B, host), name) or 'inf') then
    reindex(B, host, name)
  end
  return score
end

-- (score, sequence): the queue's order (equal scores: FIFO; Lua's string < follows the locale, never used).
local function before(x, y)
  if x.score ~= y.score then return x.score < y.score end
  return x.seq < y.seq
end

-- The k first entries of a host's queue, in order: {entry, score (number)} each. They lie in the k segments with
-- the best index scores (each holds one of them or is ahead of one); segments are read best first until the
-- next one cannot hold an entry ahead of the k-th found (an older segment holds smaller sequences).
local function queue_head(B, host, k)
  local index = redis.call('ZRANGE', index_key(B, host), 0, k - 1, 'WITHSCORES')
  local all = {}
  for i = 1, #index, 2 do
    local name, best = index[i], tonumber(index[i + 1])
    local kth = all[k]
    if kth and (best > kth.score or (best == kth.score and tonumber(name) * SEG > kth.seq)) then break end
    local got = redis.call('ZRANGE', seg_key(B, host, name), 0, k - 1, 'WITHSCORES')
    for j = 1, #got, 2 do
      all[#all + 1] = {entry = got[j], score = tonumber(got[j + 1]), seq = seq_of(got[j])}
    end
    table.sort(all, before)
    for j = #all, k + 1, -1 do all[j] = nil end
  end
  return all
end

-- Every entry of a host's queue, unordered: {entry, score (number)} each.
local function queue_all(B, host)
  local all = {}
  for _, name in ipairs(redis.call('ZRANGE', index_key(B, host), 0, -1)) do
    local got = redis.call('ZRANGE', seg_key(B, host, name), 0, -1, 'WITHSCORES')
    for j = 1, #got, 2 do all[#all + 1] = {entry = got[j], score = tonumber(got[j + 1]), seq = seq_of(got[j])} end
  end
  return all
end

-- An entry: sequence, flag byte, the fingerprint (fp, 8 bytes, or none) and then depth NUL attempt NUL redirects
-- NUL not_before NUL payload length ('' for none) NUL payload bytes and the URL; a URL of the host's own
-- "http://host" or "https://host" is kept without it (a flag bit says which).
local function make_entry(seq, host, low, fp, depth, attempt, redirects, not_before, plen, tail)
  local n = tonumber(plen) or 0
  local url, flags = sub(tail, n + 1), FLAGS + (low and 1 or 0) + (fp and 2 or 0)
  if sub(url, 1, #host + 7) == 'http://' .. host then
    url, flags = sub(url, #host + 8), flags + 4
  elseif sub(url, 1, #host + 8) == 'https://' .. host then
    url, flags = sub(url, #host + 9), flags + 8
  end
  return seq_bytes(seq) .. char(flags) .. (fp or '') .. concat({depth, attempt, redirects, not_before, plen,
                                                                 sub(tail, 1, n) .. url}, SEP)
end

-- A queue entry's fields ('', depth, attempt, redirects, not_before, payload length, payload and URL) and
-- the fingerprint it carries, or nil.
local function entry_fields(entry, host)
  local flags, at, fp = flag_of(entry), SEQ + 2, nil
  if floor(flags / 2) % 2 == 1 then at, fp = at + 8, sub(entry, SEQ + 2, SEQ + 9) end
  local e = fields(sub(entry, at), 6)
  table.insert(e, 1, '')
  local form = floor(flags / 4) % 4
  if form > 0 then
    local n = tonumber(e[6]) or 0
    e[7] = sub(e[7], 1, n) .. (form == 1 and 'http://' or 'https://') .. host .. sub(e[7], n + 1)
  end
  return e, fp
end

-- A new sequence for an entry (behind its equals): its head is rewritten, the rest kept.
local function resequence(B, h, entry)
  return seq_bytes(redis.call('HINCRBY', B .. ':h:' .. h.name, 'seq', 1)) .. sub(entry, SEQ + 1)
end

-- fp: the URL's fingerprint, kept in the entry (for its done time) or nil. low: into the host's low queue (the
-- scores from LOW on, after every normal entry).
local function push(B, h, fp, low, priority, depth, attempt, redirects, not_before, plen, tail)
  local entry = make_entry(redis.call('HINCRBY', B .. ':h:' .. h.name, 'seq', 1), h.name, low, fp, depth, attempt,
                           redirects, not_before, plen, tail)
  seg_add(B, h.name, score_of(low, priority), entry)
  if low then h.lowq = h.lowq + 1 end
  h.queued = h.queued + 1
  redis.call('HINCRBY', B .. ':c', 'queued', 1)
  return entry
end

-- Takes an entry out of its host's queue; returns its priority.
local function dequeue(B, h, entry)
  local score = tonumber(seg_remove(B, h.name, entry)) or 0
  if is_low(entry) then h.lowq = h.lowq - 1 end
  h.queued = h.queued - 1
  redis.call('HINCRBY', B .. ':c', 'queued', -1)
  return priority_of(entry, score)
end
