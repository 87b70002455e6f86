"""frontier's Redis Functions library: the seen-set's check-and-add, run server-side, one call per slot group.

Loaded with FUNCTION LOAD REPLACE (`frontier.state.redis_conn.load_library`): unlike SCRIPT LOAD, a function
library persists in RDB/AOF and replicates, so it survives a restart and a failover. URLs and fingerprints
reach it only as command arguments; this text never changes at run time.

Layout of one slot group's seen-set (key names: `frontier.state.redis_keys`)

A fingerprint is the first 8 bytes b0..b7 of the URL's xxh3_128: 64 bits, kept exactly; "bit i" counts
from the top of b0. A group is cut into chunks by linear hashing on the address A = its top 24 bits
reversed: with m chunks, 2^L <= m < 2^(L+1), chunk h is at depth d = L or L + 1 and holds exactly the
fingerprints whose top d bits, reversed, are h. The group's hash `<group>` holds "n" (URLs) and "m"
(chunks); chunk h is the string `<group>:<h>`, absent while empty:

    offset 0        u16 u: buffer slots used      2  u16 K: buffer slots      4  u8 r: 2^r = R runs
           5        (R + 1) x u16: the first entry of each run, then E (the entries in runs)
           7 + 2R   K x 8 bytes: the buffer: whole fingerprints, unsorted, the first u used, the rest zero
           7+2R+8K  the runs, run 0 first: 7 bytes per entry (b1..b7), unsorted within a run

Run x holds the chunk's fingerprints whose bits d .. d+r-1 are x. A chunk keeps d + r >= 8, so where an
entry sits pins b0, which is not stored: 7 bytes per URL. A lookup reads the chunk's head (header, run
starts, used buffer) once per call and then only its run (about RUN entries), with GETRANGE; the search
is string.find in C, at entry-aligned offsets. A new fingerprint goes into a free buffer slot with
SETRANGE, in place: the string never grows, so Redis never over-allocates it. A full buffer is merged
into the runs by rewriting the chunk (SET of an exact-length string; on jemalloc the buffer takes the
rest of the allocation's size class, which would be wasted otherwise). When the group holds more than
`load` URLs per chunk, the next chunk in linear-hashing order splits: bit d is the top bit of the run
index, so the two halves of its runs become the two new chunks, without decoding an entry. The work of
a call is bounded by the chunk size, which `load` keeps constant however large the set grows.

Local functions for later functions of this library (e.g. a commit that also enqueues the new URLs):
`seen_add(group_key, packed, load, jemalloc)` and `seen_has(group_key, packed)`: `packed` is the
group's fingerprints, 8 bytes each, sorted ascending and unique (checked: an error, never a wrong
answer); both return one byte per fingerprint, "1" (seen_add: new, now added; seen_has: present) or "0".
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

LIBRARY_NAME = "frontier"
LIBRARY_VERSION = "13"  # bump on any change of this text: instances reload a library whose version differs; the
# crawl's meta pins it, so a crawl created by another version (12: segmented host queues) is refused with one line
SEEN_LAYOUT = "1"  # bump when the seen-set's bytes change: a crawl written in another layout is refused
FUNCTION_VERSION = "frontier_version"
FUNCTION_SEEN_ADD = "frontier_seen_add"
FUNCTION_SEEN_HAS = "frontier_seen_has"
FUNCTION_LEASE = "frontier_lease"
FUNCTION_COMMIT = "frontier_commit"
FUNCTION_END = "frontier_end"
FUNCTION_RERUN = "frontier_rerun"
FUNCTION_BUDGET = "frontier_budget"
FUNCTION_RANK = "frontier_rank"
FUNCTION_DUE = "frontier_due"
FINGERPRINT_BYTES = 8  # per fingerprint in a call's argument
MAX_CHUNK_ENTRIES = 65535  # u16 run starts: a call that would pass it fails (unreachable with load <= 16384)

_HEAD = Template("""#!lua name=$name
local VERSION = '$version'
""")

# The seen-set's local functions (seen_add, seen_has and what they use): the head of every library of frontier's
# (this one, and the URL Frontier service's, frontier.urlfrontier.redis_store), whose functions call them.
_SEEN = Template(r"""local HEADER = 5        -- u16 u, u16 K, u8 r
local RUN = 64          -- entries per run the runs are sized for
local MIN_BUFFER = 16   -- buffer slots at least ...
local MAX_BUFFER = 64   -- ... and at most (a lookup reads the used ones)
local MAX_R = 12        -- at most 4096 runs
local HEAD_RUNS = 64    -- runs whose starts the first read of a chunk covers
local MAX_ENTRIES = $max_entries
local MAX_CHUNKS = 16777216  -- 2^24: the address has 24 bits

-- The standard library is reachable only while a function runs, not while the library loads.
local byte, sub, char, floor, concat, find, rep, max, spack, sunpack
local REV, POW = {}, {}
local function bind()
  if byte then return end
  byte, sub, char, floor, concat, find, rep, max = string.byte, string.sub, string.char, math.floor,
    table.concat, string.find, string.rep, math.max
  spack, sunpack = struct.pack, struct.unpack  -- the done times: 8-byte doubles
  for i = 0, 48 do POW[i] = 2 ^ i end
  for v = 0, 255 do
    local x, r = v, 0
    for _ = 1, 8 do r, x = r * 2 + x % 2, floor(x / 2) end
    REV[v] = r
  end
end

local function fail(message)
  error({err = 'ERR frontier: ' .. message})
end

local function u16(n) return char(floor(n / 256), n % 256) end

-- True if needle occurs in hay at an offset that is a multiple of width (string.find runs in C).
local function find_aligned(hay, needle, width)
  local init = 1
  while true do
    local p = find(hay, needle, init, true)
    if not p then return false end
    if (p - 1) % width == 0 then return true end
    init = p + 1
  end
end

-- Linear hashing: pw = 2^L <= m < 2^(L+1); chunks below m - pw and from pw on are one level deeper.
local function level(m)
  local pw, d = 1, 0
  while pw * 2 <= m do pw, d = pw * 2, d + 1 end
  return pw, d
end

local function chunk_of(a, m, pw, d)
  local h = a % (2 * pw)
  if h >= m then h = a % pw end
  if h < m - pw or h >= pw then return h, d + 1 end
  return h, d
end

-- The probes of a call: their 8-byte strings, their top 40 bits as a number, their addresses.
local function parse(packed)
  local n = #packed / 8
  if n ~= floor(n) then fail('fingerprints must be 8 bytes each') end
  local fps, tops, addrs = {}, {}, {}
  local phi, plo = -1, 0
  for i = 1, n do
    local o = (i - 1) * 8
    local b0, b1, b2, b3, b4, b5, b6, b7 = byte(packed, o + 1, o + 8)
    -- bytewise order, by numbers (Lua compares strings by the server's locale)
    local hi, lo = ((b0 * 256 + b1) * 256 + b2) * 256 + b3, ((b4 * 256 + b5) * 256 + b6) * 256 + b7
    if hi < phi or (hi == phi and lo <= plo) then fail('fingerprints must be sorted and unique') end
    phi, plo = hi, lo
    fps[i], tops[i] = sub(packed, o + 1, o + 8), hi * 256 + b4
    addrs[i] = REV[b0] + 256 * REV[b1] + 65536 * REV[b2]
  end
  return n, fps, tops, addrs
end

local function meta(key)
  local v = redis.call('HMGET', key, 'n', 'm')
  return tonumber(v[1]) or 0, tonumber(v[2]) or 1
end

-- A chunk's head: header, run starts and used buffer (an absent chunk: empty, with the runs it needs). One
-- GETRANGE reads it when the chunk has at most HEAD_RUNS runs (a second one reads the rest otherwise).
local function head(ckey, d)
  local h = redis.call('GETRANGE', ckey, 0, HEADER + 2 * (HEAD_RUNS + 1) + 8 * MAX_BUFFER - 1)
  local c = {key = ckey, d = d, E = 0, u = 0, K = 0, r = max(0, 8 - d), buf = ''}
  if #h >= HEADER then
    local u1, u2, k1, k2, r = byte(h, 1, HEADER)
    c.u, c.K, c.r = u1 * 256 + u2, k1 * 256 + k2, r
    local dirlen = 2 * (POW[r] + 1)
    local want = HEADER + dirlen + 8 * c.u
    if #h < want then h = h .. redis.call('GETRANGE', ckey, #h, want - 1) end
    local e1, e2 = byte(h, HEADER + dirlen - 1, HEADER + dirlen)
    c.dir, c.buf, c.E = sub(h, HEADER + 1, HEADER + dirlen), sub(h, HEADER + dirlen + 1, want), e1 * 256 + e2
  end
  c.R = POW[c.r]
  c.runs = HEADER + 2 * (c.R + 1) + 8 * c.K  -- offset of run 0
  return c
end

-- Run x (from 0) of chunk c: first entry, entries.
local function run_of(c, x)
  if c.E == 0 then return 0, 0 end
  local a1, a2, b1, b2 = byte(c.dir, 2 * x + 1, 2 * x + 4)
  local s = a1 * 256 + a2
  return s, b1 * 256 + b2 - s
end

-- Is the fingerprint (8-byte string fp, top 40 bits top) in chunk c?
local function contains(c, fp, top)
  if c.u > 0 and find_aligned(c.buf, fp, 8) then return true end
  local s, k = run_of(c, floor(top / POW[40 - c.d - c.r]) % c.R)
  if k == 0 then return false end
  local at = c.runs + 7 * s
  return find_aligned(redis.call('GETRANGE', c.key, at, at + 7 * k - 1), sub(fp, 2, 8), 7)
end

-- jemalloc's size class of n bytes (4 classes per doubling above 128).
local function size_class(n)
  if n <= 128 then return max(8, floor((n + 15) / 16) * 16) end
  local p = 256
  while p < n do p = p * 2 end
  local step = p / 8
  return floor((n + step - 1) / step) * step
end

-- Buffer slots of a chunk of `fixed` bytes besides: MIN_BUFFER, or on jemalloc what fills the size class
-- the string is allocated in anyway (an sds string takes its length + header + 1), up to MAX_BUFFER.
local function buffer_slots(fixed, jemalloc)
  local len = fixed + 8 * MIN_BUFFER
  if not jemalloc or len >= 65536 - 8 * MAX_BUFFER then return MIN_BUFFER end
  local over = len < 256 and 4 or 6
  return MIN_BUFFER + math.min(MAX_BUFFER - MIN_BUFFER, floor((size_class(len + over) - len - over) / 8))
end

-- Writes runs first..last of `runs` (lists of 7-byte pieces, `cnt` entries each) as chunk ckey, 2^r runs.
local function store(ckey, r, cnt, runs, first, last, jemalloc)
  local E, starts = 0, {}
  for x = first, last do
    starts[#starts + 1] = u16(E)
    E = E + cnt[x]
  end
  starts[#starts + 1] = u16(E)
  if E == 0 then
    redis.call('DEL', ckey)
    return
  end
  local K = buffer_slots(HEADER + 2 * (last - first + 2) + 7 * E, jemalloc)
  local parts = {u16(0), u16(K), char(r), concat(starts), rep('\0', 8 * K)}
  for x = first, last do
    local run = runs[x]
    for i = 1, #run do parts[#parts + 1] = run[i] end
  end
  redis.call('SET', ckey, concat(parts))
end

-- Every entry of chunk c (runs, buffer) and the 8-byte fingerprints `extra`, in runs: at least 2^r_min of
-- them and about RUN entries each. Returns r, the entries per run and the pieces of each run (1 .. 2^r).
local function collect(c, extra, r_min)
  local total = c.E + c.u + #extra
  if total > MAX_ENTRIES then fail('a chunk would pass ' .. MAX_ENTRIES .. ' entries') end
  local r = max(c.r, r_min)
  while r < MAX_R and total > RUN * POW[r] do r = r + 1 end
  local runs, cnt = {}, {}
  for x = 1, POW[r] do runs[x], cnt[x] = {}, 0 end
  local j, shift = r - c.r, POW[40 - c.d - r]
  if c.E > 0 then
    local old = redis.call('GETRANGE', c.key, c.runs, c.runs + 7 * c.E - 1)
    for x = 0, c.R - 1 do
      local s, k = run_of(c, x)
      if k > 0 and j == 0 then
        runs[x + 1][1], cnt[x + 1] = sub(old, 7 * s + 1, 7 * (s + k)), k
      elseif k > 0 then
        -- more runs: the next j bits of each entry (bits d + c.r ..; stored, since d + c.r >= 8) pick its run
        for o = 7 * s, 7 * (s + k - 1), 7 do
          local b1, b2, b3, b4 = byte(old, o + 1, o + 4)
          local y = x * POW[j] + floor((((b1 * 256 + b2) * 256 + b3) * 256 + b4) / shift) % POW[j] + 1
          local run = runs[y]
          run[#run + 1] = sub(old, o + 1, o + 7)
          cnt[y] = cnt[y] + 1
        end
      end
    end
  end
  local function add(fp)
    local b0, b1, b2, b3, b4 = byte(fp, 1, 5)
    local y = floor(((((b0 * 256 + b1) * 256 + b2) * 256 + b3) * 256 + b4) / shift) % POW[r] + 1
    local run = runs[y]
    run[#run + 1] = sub(fp, 2, 8)
    cnt[y] = cnt[y] + 1
  end
  for o = 0, 8 * (c.u - 1), 8 do add(sub(c.buf, o + 1, o + 8)) end
  for i = 1, #extra do add(extra[i]) end
  return r, cnt, runs
end

-- Split chunk p = m - pw (depth d) into p and m (depth d + 1): bit d is the top bit of the run index.
local function split(gkey, m, pw, d, jemalloc)
  local c = head(gkey .. ':' .. (m - pw), d)
  if c.E + c.u == 0 then return end
  local r, cnt, runs = collect(c, {}, 1)
  local half = POW[r - 1]
  store(c.key, r - 1, cnt, runs, 1, half, jemalloc)
  store(gkey .. ':' .. m, r - 1, cnt, runs, half + 1, 2 * half, jemalloc)
end

-- Probe indices per chunk, chunks in order of first appearance, and each chunk's depth.
local function route(n, addrs, m, pw, d)
  local order, members, depth = {}, {}, {}
  for i = 1, n do
    local h, hd = chunk_of(addrs[i], m, pw, d)
    local list = members[h]
    if not list then
      list = {}
      members[h], depth[h] = list, hd
      order[#order + 1] = h
    end
    list[#list + 1] = i
  end
  return order, members, depth
end

local function seen_has(gkey, packed)
  local n, fps, tops, addrs = parse(packed)
  local _, m = meta(gkey)
  local pw, d = level(m)
  local order, members, depth = route(n, addrs, m, pw, d)
  local flags = {}
  for _, h in ipairs(order) do
    local c = head(gkey .. ':' .. h, depth[h])
    for _, i in ipairs(members[h]) do
      flags[i] = contains(c, fps[i], tops[i]) and '1' or '0'
    end
  end
  return concat(flags)
end

-- dry: check only (a chunk that would pass MAX_ENTRIES fails the call), write nothing.
local function seen_add(gkey, packed, load, jemalloc, dry)
  local n, fps, tops, addrs = parse(packed)
  local total, m = meta(gkey)
  local pw, d = level(m)
  local order, members, depth = route(n, addrs, m, pw, d)
  local flags, added, work = {}, 0, {}
  -- every chunk checked before the first write: a call that fails has written nothing
  for _, h in ipairs(order) do
    local c = head(gkey .. ':' .. h, depth[h])
    local new = {}
    for _, i in ipairs(members[h]) do
      if contains(c, fps[i], tops[i]) then
        flags[i] = '0'
      else
        flags[i] = '1'
        new[#new + 1] = fps[i]
      end
    end
    if c.E + c.u + #new > MAX_ENTRIES then fail('a chunk would pass ' .. MAX_ENTRIES .. ' entries') end
    work[#work + 1] = {c, new}
  end
  if dry then return end
  for _, w in ipairs(work) do
    local c, new = w[1], w[2]
    if #new > 0 then
      if c.u + #new <= c.K then
        redis.call('SETRANGE', c.key, c.runs - 8 * (c.K - c.u), concat(new))
        redis.call('SETRANGE', c.key, 0, u16(c.u + #new))
      else
        local r, cnt, runs = collect(c, new, 0)
        store(c.key, r, cnt, runs, 1, POW[r], jemalloc)
      end
      added = added + #new
    end
  end
  if added > 0 then
    total = total + added
    while total > load * m and m < MAX_CHUNKS do
      split(gkey, m, pw, d, jemalloc)
      m = m + 1
      if m == 2 * pw then pw, d = m, d + 1 end
    end
    redis.call('HSET', gkey, 'n', total, 'm', m)
  end
  return concat(flags)
end
""")

_CRAWL = Template(r"""
-- == The crawl state of one slot group (frontier.state.redis_state) ==================================
-- B is the group's prefix (KEYS[1] = B:c, see crawl_call); its keys, all in the group's hash slot:
--   B:c           hash: the group's counters queued, inflight, fetched, attempts, hosts, unreach, and epoch:
--                 the crawl's identity, written when the crawl is created and checked by every call
--   B:rq          hash request id -> the call's reply (cmsgpack; a lease's: its keys), B:rqt zset request id
--                 -> when: a call sent again after its reply was lost gets that reply, not a second effect
--   B:ready       zset host -> the time it may be leased next (hosts with leasable work, or a robots.txt due)
--   B:leases      zset lease key -> deadline          B:L   hash lease key -> lease (see lease_data)
--   B:hosts       set of the group's hosts            B:unr hash host -> network error (held back)
--   B:held        hash host NUL entry -> network error (an unreachable seed, held back)
--   B:ts          hash host -> host_state bytes
--   B:h:<host>    hash: queued, inflight, held, fetched, delay, next, pause, robots_at, gate, rfail, scheme, seq,
--                 turn (page leases in its turn so far), tend (when its last turn ended: B:c's 'turns')
--   B:q:<host>:<s> zset entry -> -priority (a low entry: LOW - priority): segment s of the host's queue, the
--                 entries whose sequence (from the host's 'seq') is in [s * SEG, (s + 1) * SEG), so at most
--                 SEG: it stays a listpack (zset-max-listpack-entries; -value: 64 bytes by default, a longer
--                 entry makes its segment a skiplist). Equal scores sort by the entry's first bytes, its
--                 sequence (6 bytes, big-endian), so FIFO among equals. An entry's own bytes name its segment.
--                 entry = sequence, a flag byte (low, fingerprint, URL form), the URL's 8-byte fingerprint
--                 when queued under recrawl_after, then depth NUL attempt NUL redirects NUL not_before NUL
--                 payload length ('' for none) NUL payload bytes then the URL, without "http://<host>" or
--                 "https://<host>" (the flag says which: the key names the host). See make_entry.
--                 s is 13 digits, zero-padded. A leased entry stays queued, marked in B:q:<host>:lq (entry ->
--                 lease key)
--   B:qi:<host>   zset s -> segment s's best score: the host's segments in lease order (equal scores: the
--                 older segment first, as it holds the smaller sequences); an empty segment leaves it
--   B:r:<host>    string: the host's robots.txt
--   B:done        hash fingerprint -> when the URL left the queue for good (8-byte double): written for the
--                 entries that carry their fingerprint, deleted when the URL is queued again
-- gate: '' (robots.txt due once robots_at + ttl has passed), 'leased' (a robots.txt lease is out),
-- 'unreach' (held back: its robots.txt failed with a network error).
local SEP = '\0'
local P = {}

local function fields(s, n)
  local out, init = {}, 1
  for i = 1, n - 1 do
    local p = find(s, SEP, init, true)
    if not p then fail('malformed record') end
    out[i] = sub(s, init, p - 1)
    init = p + 1
  end
  out[n] = sub(s, init)
  return out
end

-- The call's context: the crawl's policy, then the call's request id, the crawl's epoch, the caller's `now` and
-- its clock's reading, both on the server's clock as the caller estimates it (its offset to the server's,
-- measured now and then). The time of the call is the server's (TIME), moved by how far the caller's `now` is
-- from its clock (0 in a crawl; a test injects times); a caller whose `now` is within TRUST of that keeps its
-- own, so a step's times are one clock (exact, as a test injects them). Farther off (a clock that jumped since
-- it was measured, a call sent again after an outage) the server's time is the call's: no instance's clock
-- decides a deadline, a delay or an expiry by more than TRUST. P.shift takes the times the caller sent (a
-- backoff, a pause, a fetch time) by as much.
local TRUST = 1.0  -- seconds: frontier.state.redis_state.SKEW_WARN
local function policy(packed)
  local v = fields(packed, 15)
  P.mph, P.delay, P.obey, P.ttl = tonumber(v[1]), tonumber(v[2]), v[3] == '1', tonumber(v[4])
  P.mpph, P.retries, P.timeout, P.inst = tonumber(v[5]), tonumber(v[6]), tonumber(v[7]), v[8]
  P.after = tonumber(v[9])  -- recrawl_after, nil: never
  P.msp = tonumber(v[10])  -- max_suspect_pages, -1: no limit
  P.turn = tonumber(v[11])  -- host_turn, -1: no turns
  P.rid, P.epoch, P.leases = v[12], v[13], 0
  local asked, t = tonumber(v[14]), redis.call('TIME')
  local server = tonumber(t[1]) + tonumber(t[2]) / 1e6 + (asked - tonumber(v[15]))
  P.now = math.abs(asked - server) <= TRUST and asked or server
  P.shift = P.now - asked
end

-- A time the caller sent, on the server's clock (0, no time, stays 0); a number (written into a string with
-- format '%.17g': Lua's own conversion keeps 14 digits).
local function on_server(x)
  local t = tonumber(x)
  return t == 0 and 0 or t + P.shift
end

local HOST_FIELDS = {'queued', 'inflight', 'held', 'fetched', 'delay', 'next', 'pause', 'robots_at', 'gate',
                     'rfail', 'scheme', 'lowq', 'lowin', 'lowused', 'turn', 'tend', 'lowheld'}

local function host_get(B, cache, host)
  local h = cache[host]
  if h then return h end
  local v = redis.call('HMGET', B .. ':h:' .. host, unpack(HOST_FIELDS))
  h = {name = host, queued = tonumber(v[1]) or 0, inflight = tonumber(v[2]) or 0, held = tonumber(v[3]) or 0,
       fetched = tonumber(v[4]) or 0, delay = tonumber(v[5]), next = tonumber(v[6]) or 0,
       pause = tonumber(v[7]) or 0, robots_at = tonumber(v[8]), gate = v[9] or '', rfail = tonumber(v[10]) or 0,
       scheme = v[11] or nil, lowq = tonumber(v[12]) or 0, lowin = tonumber(v[13]) or 0,
       lowused = tonumber(v[14]) or 0, turn = tonumber(v[15]) or 0, tend = tonumber(v[16]) or 0,
       lowheld = tonumber(v[17]) or 0}
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
                'lowused', h.lowused, 'turn', h.turn, 'tend', h.tend, 'lowheld', h.lowheld}
  if h.delay then args[#args + 1] = 'delay'; args[#args + 1] = h.delay end
  if h.robots_at then args[#args + 1] = 'robots_at'; args[#args + 1] = h.robots_at end
  redis.call('HSET', B .. ':h:' .. h.name, unpack(args))
  reready(B, h, now)
end

local function save_all(B, cache, now)
  for i = 1, #cache do host_save(B, cache[i], now) end
end

local LOW = 2 ^ 50  -- the scores of the low band start here (priorities are within +-1e12)
local PARKED = 'trap_budget'  -- frontier.state.base.PARKED: the reason a parked entry is held for
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
  local head = redis.call('ZRANGE', seg_key(B, host, name), 0, 0, 'WITHSCORES')
  if head[1] then
    redis.call('ZADD', index_key(B, host), head[2], name)  -- the score as the server wrote it: exact
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
  if tonumber(score) <= tonumber(redis.call('ZSCORE', index_key(B, host), name) or 'inf') then reindex(B, host, name) end
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
local function end_lease(B, cache, key, data)
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
    if robots_due(h, now) then
      if h.gate == '' then
        local url = (h.scheme or 'http') .. '://' .. name .. '/robots.txt'
        local data = lease_data('r', name, make_entry(0, name, false, nil, 0, h.rfail, 0, 0, '', url))
        out[#out + 1] = new_lease(B, g, data, now)
        out[#out + 1] = data
        h.gate = 'leased'
        jobs = jobs + 1
      end
    else
      local slots = math.min((host_delay(h) > 0 and 1 or P.mph) - h.inflight, n - jobs)
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
        if low and outcome ~= 'drop' and outcome ~= 'low' and outcome ~= 'park' then h.lowused = h.lowused + 1 end
        if outcome == 'drop' then
          released = released + 1
        elseif outcome == 'low' then  -- moved to the host's low queue unfetched: no attempt
          push(B, h, fp, true, priority, e[2], e[3], e[4], 0, e[6], e[7])
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
      local d, h = end_lease(B, cache, key, data)
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

-- KEYS[1] is B:c, a key the group's state always has: while a Cluster moves the group's slot, a call goes
-- to the node that holds it, so to the one that holds all of the group's keys if they move in one MIGRATE.
-- Checks the crawl's epoch (a server restarted empty, flushed or evicting has lost the crawl: the call
-- refuses rather than run on an empty state). Returns B and the time.
local function crawl_call(keys, args, first)
  bind()
  policy(args[first])
  if redis.call('HGET', keys[1], 'epoch') ~= P.epoch then
    fail('the crawl state is gone from the server (' .. keys[1] .. ' lacks epoch ' .. P.epoch ..
         '): it was restarted empty, flushed, or evicted keys')
  end
  return sub(keys[1], 1, -3), P.now
end

-- The reply of an earlier call with this request id (sent again after its reply was lost), or nil.
local function replayed(B)
  local stored = redis.call('HGET', B .. ':rq', P.rid)
  return stored and cmsgpack.unpack(stored)
end

-- Keeps `stored` as the call's reply for a lease_timeout (a call is not sent again later: its leases
-- would have expired), and forgets older ones. Returns reply.
local function remember(B, now, stored, reply)
  redis.call('HSET', B .. ':rq', P.rid, cmsgpack.pack(stored))
  redis.call('ZADD', B .. ':rqt', now, P.rid)
  local old = redis.call('ZRANGEBYSCORE', B .. ':rqt', '-inf', now - P.timeout, 'LIMIT', 0, 64)
  if #old > 0 then
    redis.call('HDEL', B .. ':rq', unpack(old))
    redis.call('ZREM', B .. ':rqt', unpack(old))
  end
  return reply
end

-- A call run once per request id: body(B, now) on the first, its stored reply on a repeat.
local function once(keys, args, first, body)
  local B, now = crawl_call(keys, args, first)
  local again = replayed(B)
  if again then return again end
  local reply = body(B, now)
  return remember(B, now, reply, reply)
end

-- args: group, context, n, budget. A repeat gets the call's leases that have not ended since.
redis.register_function{function_name = '$fn_lease',
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
  local l = fields(record, 8)
  number(l[1], 'link position')
  number(l[6], 'link priority')
  if l[7] ~= '' then number(l[7], 'payload length') end
  if not find(sub(l[8], (tonumber(l[7]) or 0) + 1), ':', 1, true) then fail('malformed link URL') end
end

local function check_commit(L, args, acks_at, nacks, states, rescores)
  if #L.fps ~= 8 * #L.records or #L.forced_fps ~= 8 * #L.forced then fail('fingerprints and links differ') end
  if #L.records > 0 then parse(L.fps) end
  for _, record in ipairs(L.records) do check_link(record) end
  for _, record in ipairs(L.forced) do check_link(record) end
  for i = acks_at, acks_at + 2 * nacks - 1, 2 do
    local a = fields(args[i] or fail('missing ack'), 9)
    if a[1] ~= 'p' and a[1] ~= 'r' then fail('malformed ack kind') end
    for _, j in ipairs({5, 6, 8, 9}) do number(a[j], 'ack time') end
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

redis.register_function{function_name = '$fn_commit',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return commit(B, now, args) end)
  end}

-- args: mode, context, limit
redis.register_function{function_name = '$fn_end',
  callback = function(keys, args)
    return once(keys, args, 2, function(B, now) return end_leases(B, args[1], now, tonumber(args[3])) end)
  end}

-- args: context. The rank of the group's best ready host: {robots.txt due (0) or not (1), turn end, best
-- priority as a string}, or {} if none is ready: the caller asks the best ranked groups first.
redis.register_function{function_name = '$fn_rank', flags = {'no-writes'},
  callback = function(keys, args)
    local B, now = crawl_call(keys, args, 1)
    local top = ranked_hosts(B, now, 1)[1]
    if not top then return {} end
    return {top.due, top.tend, tostring(top.best)}
  end}

-- args: context, limit (revisits: queue_due)
redis.register_function{function_name = '$fn_due',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return queue_due(B, now, tonumber(args[2])) end)
  end}

-- args: context
redis.register_function{function_name = '$fn_rerun',
  callback = function(keys, args)
    return once(keys, args, 1, function(B, now) return rerun(B, now) end)
  end}

-- KEYS[1]: the budget hash: epoch (the crawl's, as every group's) and used (pages fetched or leased). args: delta
-- (> 0: reserve up to delta of max pages; < 0: give back), max, the crawl's epoch. Returns what was reserved.
redis.register_function{function_name = '$fn_budget',
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

redis.register_function{function_name = '$fn_version', flags = {'no-writes'},
  callback = function() return VERSION end}

redis.register_function{function_name = '$fn_has', flags = {'no-writes'},
  callback = function(keys, args)
    bind()
    return seen_has(keys[1], args[1])
  end}

redis.register_function{function_name = '$fn_add',
  callback = function(keys, args)
    bind()
    local load = tonumber(args[2])
    if not load or load < 1 then fail('load must be a number >= 1') end
    return seen_add(keys[1], args[1], load, args[3] == 'jemalloc')
  end}
""")

@dataclass(frozen=True, slots=True)
class Library:
    """A Functions library: its text, and the function that answers its version (`load_library` reloads a
    master whose answer differs)."""

    text: str
    version: str
    version_function: str


def library(name: str, version: str, version_function: str, body: str) -> Library:
    """A library named `name` whose functions (`body`, Lua) may call the seen-set's local functions: seen_add,
    seen_has, bind (call it first in each function), fail."""
    return Library(_HEAD.substitute(name=name, version=version) + _SEEN.substitute(max_entries=MAX_CHUNK_ENTRIES)
                   + body, version, version_function)


FRONTIER = library(LIBRARY_NAME, LIBRARY_VERSION, FUNCTION_VERSION, _CRAWL.substitute(
    fn_version=FUNCTION_VERSION, fn_has=FUNCTION_SEEN_HAS, fn_add=FUNCTION_SEEN_ADD, fn_lease=FUNCTION_LEASE,
    fn_commit=FUNCTION_COMMIT, fn_end=FUNCTION_END, fn_rerun=FUNCTION_RERUN, fn_budget=FUNCTION_BUDGET,
    fn_rank=FUNCTION_RANK, fn_due=FUNCTION_DUE))
LIBRARY = FRONTIER.text
