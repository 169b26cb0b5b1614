-- goto, break, varargs, select, multiple returns, closures, string escapes.
for i = 1, 10 do
	if i % 2 == 0 then goto continue end
	if i > 7 then break end
	io_w = (io_w or "") .. i .. " "
	::continue::
end
print(io_w)
do
	local i = 1
	::top::
	if i <= 3 then i = i + 1 goto top end
	print("after loop", i)
end
for i = 1, 3 do
	for j = 1, 3 do
		if j == 2 then goto next_i end
		print("pair", i, j)
	end
	::next_i::
end
local function va(...)
	local n = select("#", ...)
	local a, b = ...
	local t = {...}
	local p = table.pack(...)
	return n, a, b, #t, p.n, select(2, ...)
end
print(va())
print(va(1))
print(va(1, nil, 3))
print(va(nil, nil))
print(select(-1, "a", "b", "c"), select(-2, "a", "b", "c"), select(3, "a", "b"), pcall(select, 0, 1))
local function multi() return 1, 2, 3 end
print(multi(), (multi()), #{multi()}, multi(), "end")
local t = {multi(), multi()}
print(#t, t[1], t[2], t[4])
local function sum(...)
	local s = 0
	for i = 1, select("#", ...) do s = s + (select(i, ...) or 0) end
	return s
end
print(sum(1, 2, 3, nil, 5), sum(), sum(table.unpack({10, 20, 30})))
local function curry(f, x) return function(...) return f(x, ...) end end
print(curry(sum, 100)(1, 2), curry(string.rep, "ab")(3, "-"))
-- closures capture per iteration
local fns = {}
for i = 1, 5 do fns[i] = function() return i * 10 end end
local acc = {}
for _, f in ipairs(fns) do acc[#acc + 1] = f() end
print(table.concat(acc, ","))
local function counter()
	local n = 0
	return function() n = n + 1 return n end, function() return n end
end
local inc, get = counter()
inc() inc() inc()
print(get())
-- while, repeat, numeric and generic for, nested functions
local n, r = 0, 0
while n < 10 do n = n + 3 end
repeat r = r + 1 local done = r >= 4 until done
print(n, r)
local fact
fact = function(k) return k <= 1 and 1 or k * fact(k - 1) end
print(fact(20), fact(21), fact(5.0))
-- string escapes and long strings
print("tab\tnew\\nquote\"apos\'bell\a|\x41\65\u{263A}|\z
	continued", [[long
string]], [==[with ]] inside]==], #"\0\1\2", "a\
b")
print(type(nil), type(print), type({}), type(""), type(2), type(true), type(coroutine.create(print)))
print(not nil, not 0, nil and 1, false or "x", 1 and 2, nil or false, 1 < 2 and "lt" or "ge")
print("a" < "b", "Z" < "a", "abc" < "abd", "" < "a", "10" < "9", 2 < 10)
print(pcall(function() return 1 < "2" end))
print(pcall(function() return {} < {} end))
local x, y, z = 1, 2
x, y = y, x
print(x, y, z)
print(_VERSION, _G._G == _G, _G.print == print, _ENV == _G)
print(assert(1, "unused"), select("#", assert(true, 2, 3)), pcall(assert, false), pcall(assert, nil, "custom message"), type(select(2, pcall(assert, false, {}))))
print(pcall(error), pcall(error, nil), pcall(error, "lvl0", 0), pcall(error, "lvl1"), pcall(error, "lvl2", 2), pcall(error, 42))
print(xpcall(function() error("in xpcall") end, function(m) return "handled: " .. m end))
print(xpcall(function(a, b) return a + b end, print, 3, 4))
print(xpcall(function() local t = nil; return t.x end, function(m) return (m:gsub("^.-:%d+: ", "")) end))
