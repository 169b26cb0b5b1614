-- Metatables and OOP idioms: classes, inheritance, operators, proxies, __close.
local Vec = {}
Vec.__index = Vec
function Vec.new(x, y) return setmetatable({x = x, y = y}, Vec) end
function Vec.__add(a, b) return Vec.new(a.x + b.x, a.y + b.y) end
function Vec.__sub(a, b) return Vec.new(a.x - b.x, a.y - b.y) end
function Vec.__mul(a, b)
	if type(a) == "number" then return Vec.new(a * b.x, a * b.y) end
	if type(b) == "number" then return Vec.new(a.x * b, a.y * b) end
	return a.x * b.x + a.y * b.y
end
function Vec.__unm(a) return Vec.new(-a.x, -a.y) end
function Vec.__eq(a, b) return a.x == b.x and a.y == b.y end
function Vec.__lt(a, b) return a:len() < b:len() end
function Vec.__le(a, b) return a:len() <= b:len() end
function Vec.__len(a) return 2 end
function Vec.__tostring(a) return "(" .. a.x .. ", " .. a.y .. ")" end
function Vec.__concat(a, b) return tostring(a) .. tostring(b) end
function Vec.__call(self, k) return self[k] end
function Vec.__idiv(a, n) return Vec.new(a.x // n, a.y // n) end
function Vec.__mod(a, n) return Vec.new(a.x % n, a.y % n) end
function Vec.__div(a, n) return Vec.new(a.x / n, a.y / n) end
function Vec.__pow(a, n) return Vec.new(a.x ^ n, a.y ^ n) end
function Vec:len() return math.sqrt(self.x * self.x + self.y * self.y) end
local a, b = Vec.new(1, 2), Vec.new(3, 4)
print(a + b, a - b, a * b, 2 * a, a * 3, -a, a == Vec.new(1, 2), a ~= b, a < b, b <= a, #a)
print(a .. b, a("x"), b("y"), b // 2, b % 3, b / 2, a ^ 2, tostring(b:len()))
-- bitwise metamethods
local Bits = setmetatable({}, {__band = function() return "band" end, __bor = function() return "bor" end,
	__bxor = function() return "bxor" end, __shl = function() return "shl" end,
	__shr = function() return "shr" end, __bnot = function() return "bnot" end})
print(Bits & 1, 1 | Bits, Bits ~ 2, Bits << 1, Bits >> 1, ~Bits)
-- inheritance
local Animal = {}
Animal.__index = Animal
function Animal.new(name, sound) local o = setmetatable({}, Animal) o.name = name o.sound = sound return o end
function Animal:speak() return self.name .. " says " .. self.sound end
function Animal:kind() return "animal" end
local Dog = setmetatable({}, {__index = Animal})
Dog.__index = Dog
function Dog.new(name) local o = Animal.new(name, "woof") return setmetatable(o, Dog) end
function Dog:kind() return "dog" end
function Dog:fetch() return self.name .. " fetches" end
local d, c = Dog.new("rex"), Animal.new("tom", "meow")
print(d:speak(), d:kind(), d:fetch(), c:speak(), c:kind(), c.fetch, getmetatable(d) == Dog)
-- __index and __newindex functions: defaults, read-only tables, proxies that log
local defaults = setmetatable({}, {__index = function(t, k) return "default:" .. k end})
defaults.set = "explicit"
print(defaults.set, defaults.other, rawget(defaults, "other"))
local function readonly(t)
	return setmetatable({}, {__index = t, __newindex = function(_, k) error("read-only: " .. k, 2) end,
		__len = function() return #t end, __pairs = function() return next, t, nil end})
end
local ro = readonly({1, 2, 3, x = "y"})
print(ro[2], ro.x, #ro, pcall(function() ro.z = 1 end))
local keys = {}
for k, v in pairs(ro) do keys[#keys + 1] = tostring(k) .. "=" .. tostring(v) end
table.sort(keys)
print(table.concat(keys, " "))
local log = {}
local store = {}
local proxy = setmetatable({}, {
	__index = function(_, k) log[#log + 1] = "get " .. k return store[k] end,
	__newindex = function(_, k, v) log[#log + 1] = "set " .. k store[k] = v end})
proxy.a = 1 proxy.b = proxy.a + 1 local _ = proxy.c
print(table.concat(log, ", "), store.b, rawget(proxy, "a"))
rawset(proxy, "direct", true)
print(proxy.direct, #log)
-- __metatable protection, __close, __gc ignored in output, __mode
local locked = setmetatable({}, {__metatable = "locked"})
print(getmetatable(locked), pcall(setmetatable, locked, {}))
do
	local order = {}
	do
		local x <close> = setmetatable({}, {__close = function(_, e) order[#order + 1] = "x closed " .. tostring(e) end})
		local y <close> = setmetatable({}, {__close = function() order[#order + 1] = "y closed" end})
		order[#order + 1] = "body"
	end
	local ok, err = pcall(function()
		local z <close> = setmetatable({}, {__close = function(_, e) order[#order + 1] = "z closed with " .. e end})
		error("fail", 0)
	end)
	print(table.concat(order, "; "), ok, err)
end
local const <const> = 42
print(const)
-- a class helper with __call constructors and tostring from the class
local function class(parent)
	local cls = {}
	cls.__index = cls
	setmetatable(cls, {__index = parent, __call = function(k, ...) local o = setmetatable({}, k) if o.init then o:init(...) end return o end})
	return cls
end
local Stack = class()
function Stack:init() self.items = {} end
function Stack:push(v) self.items[#self.items + 1] = v return self end
function Stack:pop() return table.remove(self.items) end
Stack.__tostring = function(s) return "Stack[" .. table.concat(s.items, ",") .. "]" end
local CountingStack = class(Stack)
CountingStack.__tostring = Stack.__tostring
function CountingStack:push(v) self.pushes = (self.pushes or 0) + 1 return Stack.push(self, v) end
local st = CountingStack()
st:push(1):push(2):push(3)
print(tostring(st), st:pop(), st.pushes, tostring(st))
print(("x"):rep(3), ("%d"):format(7), #("abc"))
