-- Coroutines: generators, pipelines, status, errors, wrap, close.
local function range(n)
	return coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end)
end
local s = 0
for i in range(100) do s = s + i end
print(s)
local function gen_words(text)
	return coroutine.wrap(function() for w in text:gmatch("%a+") do coroutine.yield(w) end end)
end
local function filter(pred, g)
	return coroutine.wrap(function() for v in g do if pred(v) then coroutine.yield(v) end end end)
end
local function map(f, g)
	return coroutine.wrap(function() for v in g do coroutine.yield(f(v)) end end)
end
local out = {}
for w in map(string.upper, filter(function(w) return #w > 3 end, gen_words("the quick brown fox jumps over a lazy dog"))) do out[#out + 1] = w end
print(table.concat(out, " "))
-- producer/consumer with values both ways
local co = coroutine.create(function(a, b)
	print("start", a, b)
	local c = coroutine.yield(a + b)
	print("got", c)
	local d, e = coroutine.yield(c * 2)
	print("got", d, e)
	return "done", d + e
end)
print(coroutine.status(co))
print(coroutine.resume(co, 1, 2))
print(coroutine.status(co))
print(coroutine.resume(co, 10))
print(coroutine.resume(co, 3, 4))
print(coroutine.status(co), coroutine.resume(co))
-- errors inside coroutines
local bad = coroutine.create(function() error("oops") end)
print(coroutine.resume(bad))
print(coroutine.status(bad))
local bad2 = coroutine.create(function() error({code = 7}) end)
local ok, e = coroutine.resume(bad2)
print(ok, type(e), e.code)
local w = coroutine.wrap(function() error("in wrap") end)
print(pcall(w))
local w2 = coroutine.wrap(function() return 1 end)
w2()
print(pcall(w2))
-- running, isyieldable, yield across pcall
print(coroutine.isyieldable(), select(2, coroutine.running()))
local inner = coroutine.create(function()
	print(coroutine.isyieldable(), select(2, coroutine.running()), coroutine.status(coroutine.running()))
	local ok2, v = pcall(function() return coroutine.yield("from pcall") end)
	return ok2, v
end)
print(coroutine.resume(inner))
print(coroutine.resume(inner, "resumed"))
-- close
local closable = coroutine.create(function() coroutine.yield(1) end)
coroutine.resume(closable)
print(coroutine.close(closable), coroutine.status(closable))
local errco = coroutine.create(function() local x <close> = setmetatable({}, {__close = function() end}) error("boom") end)
print(coroutine.resume(errco))
print(coroutine.close(errco))
print(pcall(coroutine.resume, 5))
print(coroutine.resume(coroutine.running()))
-- a scheduler of tasks
local tasks, log = {}, {}
for id = 1, 3 do
	tasks[#tasks + 1] = coroutine.create(function()
		for step = 1, id + 1 do log[#log + 1] = id .. "." .. step coroutine.yield() end
	end)
end
while #tasks > 0 do
	for i = #tasks, 1, -1 do
		coroutine.resume(tasks[i])
		if coroutine.status(tasks[i]) == "dead" then table.remove(tasks, i) end
	end
end
print(table.concat(log, " "))
-- many coroutines
local count = 0
for i = 1, 2000 do
	local c = coroutine.wrap(function(x) local y = coroutine.yield(x + 1) return y * 2 end)
	count = count + c(i) + c(3)
end
print(count)
