-- The crawl state's keys, and the context of a call: its policy, request id, epoch and time.
-- Local functions: fields(s, n), policy(packed), on_server(x). No KEYS / ARGV: its callers pass them.
--- @include "state/lua/seen"

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
--                 turn (page leases in its turn so far), tend (when its last turn ended: B:c's 'turns'), bo (its
--                 backoff level: overloads less the fetched results without one since)
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
  local v = fields(packed, 18)
  P.mph, P.delay, P.obey, P.ttl = tonumber(v[1]), tonumber(v[2]), v[3] == '1', tonumber(v[4])
  P.mpph, P.retries, P.timeout, P.inst = tonumber(v[5]), tonumber(v[6]), tonumber(v[7]), v[8]
  P.after = tonumber(v[9])  -- recrawl_after, nil: never
  P.msp = tonumber(v[10])  -- max_suspect_pages, -1: no limit
  P.turn = tonumber(v[11])  -- host_turn, -1: no turns
  P.bomax = tonumber(v[12])  -- backoff_max: the cap on a host's (a group's) backoff pause
  P.qby, P.gpre = v[13], v[14]  -- queue_by (host, domain or ip), the prefix of the queue groups' keys (crawl_groups)
  P.rid, P.epoch, P.leases = v[15], v[16], 0
  local asked, t = tonumber(v[17]), redis.call('TIME')
  local server = tonumber(t[1]) + tonumber(t[2]) / 1e6 + (asked - tonumber(v[18]))
  P.now = math.abs(asked - server) <= TRUST and asked or server
  P.shift = P.now - asked
end

-- A time the caller sent, on the server's clock (0, no time, stays 0); a number (written into a string with
-- format '%.17g': Lua's own conversion keeps 14 digits).
local function on_server(x)
  local t = tonumber(x)
  return t == 0 and 0 or t + P.shift
end
