-- Runs a corpus program under plain lua5.4 in the environment box-run gives a script: the
-- same globals removed, os reduced, string.dump gone, the chunk named "script", arg as
-- box-run sets it, and json/base64 from tests/corpus/oracle.lua (an independent Lua version
-- of the rules of box-run(1)). Usage: lua5.4 prelude.lua PROGRAM.lua [cover]
-- With "cover", every call of a function of stdlib.list is recorded, and each one called is
-- printed to stderr at the end ("called: string.rep").
local path, mode = ...
local open, stderr, load, sethook, getinfo = io.open, io.stderr, load, debug.sethook, debug.getinfo
local dir = arg[0]:match("^(.*)/[^/]*$") or "."

local function slurp(p)
	local f = assert(open(p, "rb"))
	local s = f:read("a")
	f:close()
	return s
end

local oracle = assert(load(slurp(dir .. "/oracle.lua"), "=oracle", "t", _ENV))()
local src = slurp(path)
local list = mode == "cover" and slurp(dir .. "/stdlib.list")

for _, name in ipairs({"dofile", "loadfile", "load", "loadstring", "require", "collectgarbage",
		"warn", "io", "package", "debug", "module", "setfenv", "getfenv", "unpack"}) do
	_G[name] = nil
end
local os_keep = {}
for _, name in ipairs({"time", "date", "clock", "difftime"}) do os_keep[name] = os[name] end
os = os_keep
string.dump = nil
json, base64 = oracle.json, oracle.base64
arg = {[0] = "-"}

local chunk = assert(load(src, "=script", "t", _ENV))
if list then
	local seen, want = {}, {}
	for name in list:gmatch("[^\n]+") do
		local lib, fn = name:match("^(%w+)%.(%w+)$")
		local f = lib and _G[lib][fn] or _G[name]
		if type(f) == "function" then want[f] = name end
	end
	local function hook()
		local f = getinfo(2, "f").func
		if want[f] then seen[f] = true end
	end
	-- a coroutine does not inherit the hook: give it to each one (the output of a cover
	-- run is not compared, so wrap may be a Lua function here)
	local create, resume, wrap, pack, unpack = coroutine.create, coroutine.resume,
		coroutine.wrap, table.pack, table.unpack
	coroutine.create = function(f)
		local co = create(f)
		sethook(co, hook, "c")
		return co
	end
	coroutine.wrap = function(f)
		seen[wrap] = true
		local co = coroutine.create(f)
		return function(...)
			local r = pack(resume(co, ...))
			if not r[1] then error(r[2], 0) end
			return unpack(r, 2, r.n)
		end
	end
	sethook(hook, "c")
	chunk()
	sethook()
	for f in pairs(seen) do stderr:write("called: ", want[f], "\n") end
else
	chunk()
end
