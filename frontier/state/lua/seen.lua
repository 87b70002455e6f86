-- The seen-set of one slot group: exact 8-byte fingerprints in chunked, run-sorted strings.
--
-- Layout of one slot group's seen-set (key names: `frontier.state.redis_keys`)
--
-- A fingerprint is the first 8 bytes b0..b7 of the URL's xxh3_128: 64 bits, kept exactly; "bit i" counts
-- from the top of b0. A group is cut into chunks by linear hashing on the address A = its top 24 bits
-- reversed: with m chunks, 2^L <= m < 2^(L+1), chunk h is at depth d = L or L + 1 and holds exactly the
-- fingerprints whose top d bits, reversed, are h. The group's hash `<group>` holds "n" (URLs) and "m"
-- (chunks); chunk h is the string `<group>:<h>`, absent while empty:
--
--     offset 0        u16 u: buffer slots used      2  u16 K: buffer slots      4  u8 r: 2^r = R runs
--            5        (R + 1) x u16: the first entry of each run, then E (the entries in runs)
--            7 + 2R   K x 8 bytes: the buffer: whole fingerprints, unsorted, the first u used, the rest zero
--            7+2R+8K  the runs, run 0 first: 7 bytes per entry (b1..b7), unsorted within a run
--
-- Run x holds the chunk's fingerprints whose bits d .. d+r-1 are x. A chunk keeps d + r >= 8, so where an
-- entry sits pins b0, which is not stored: 7 bytes per URL. A lookup reads the chunk's head (header, run
-- starts, used buffer) once per call and then only its run (about RUN entries), with GETRANGE; the search
-- is string.find in C, at entry-aligned offsets. A new fingerprint goes into a free buffer slot with
-- SETRANGE, in place: the string never grows, so Redis never over-allocates it. A full buffer is merged
-- into the runs by rewriting the chunk (SET of an exact-length string; on jemalloc the buffer takes the
-- rest of the allocation's size class, which would be wasted otherwise). When the group holds more than
-- `load` URLs per chunk, the next chunk in linear-hashing order splits: bit d is the top bit of the run
-- index, so the two halves of its runs become the two new chunks, without decoding an entry. The work of
-- a call is bounded by the chunk size, which `load` keeps constant however large the set grows.
--
-- Local functions for later functions of this library (e.g. a commit that also enqueues the new URLs):
-- `seen_add(group_key, packed, load, jemalloc)` and `seen_has(group_key, packed)`: `packed` is the
-- group's fingerprints, 8 bytes each, sorted ascending and unique (checked: an error, never a wrong
-- answer); both return one byte per fingerprint, "1" (seen_add: new, now added; seen_has: present) or "0".

local HEADER = 5        -- u16 u, u16 K, u8 r
local RUN = 64          -- entries per run the runs are sized for
local MIN_BUFFER = 16   -- buffer slots at least ...
local MAX_BUFFER = 64   -- ... and at most (a lookup reads the used ones)
local MAX_R = 12        -- at most 4096 runs
local HEAD_RUNS = 64    -- runs whose starts the first read of a chunk covers
local MAX_ENTRIES = 65535
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
