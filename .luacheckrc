-- luacheck settings for the Redis Functions libraries (frontier/state/lua, frontier/urlfrontier/lua), checked
-- as FUNCTION LOAD takes them: each library joined from its files (.ci/luacheck).
std = "lua51"  -- Redis and Valkey run Lua 5.1
read_globals = {"redis", "cjson", "cmsgpack", "bit", "struct", "KEYS", "ARGV"}
max_line_length = 120

