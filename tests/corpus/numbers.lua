-- Integer and float arithmetic at the edges, conversions, bitwise operators, string.pack.
local maxi, mini = math.maxinteger, math.mininteger
print(maxi, mini, maxi + 1 == mini, mini - 1 == maxi, maxi * 2, -mini == mini, math.abs(mini))
print(7 // 2, -7 // 2, 7 // -2, 7 % 3, -7 % 3, 7 % -3, 7.5 // 2, -7.5 % 2, 5.0 % 0.3 < 0.3)
print(1 / 0, -1 / 0, 0 / 0 ~= 0 / 0, math.huge == 1 / 0, -math.huge < mini, 3 / 2, 4 / 2, 2 ^ 10, 2 ^ 0.5)
print(pcall(function() return 1 // 0 end))
print(pcall(function() return 1 % 0 end))
print(1.0 // 0, -1 % math.huge, 1e308 * 10, -1e308 * 10, 5 // 0.0, -5 // 0.0)
print(math.type(1), math.type(1.0), math.type("1"), math.type(2 ^ 53), math.type(3 // 1), math.type(3.0 // 1))
print(1 == 1.0, math.tointeger(3.0), math.tointeger(3.5), math.tointeger("8"), math.tointeger(2 ^ 63))
print(0x10, 0xff, 0x7fffffffffffffff, 0xffffffffffffffff, 1e2, .5, 3., 0x1p4, 0xA.8p0)
print(100000000000000, 1e15, 123456789012345678, 2 ^ 63, -2 ^ 63 == mini, 9007199254740993)
print(tonumber("42"), tonumber("0x1F"), tonumber("  12  "), tonumber("1e3"), tonumber("abc"), tonumber(""), tonumber("1 2"))
print(tonumber("ff", 16), tonumber("777", 8), tonumber("zz", 36), tonumber("102", 2), tonumber("-101", 2), tonumber("7fffffffffffffff", 16))
print("10" + 5, "3.5" * 2, 10 .. 20, "0x10" + 0, 2 ^ "3", pcall(function() return "a" + 1 end))
print(3 & 5, 3 | 5, 3 ~ 5, ~0, 1 << 62, 1 << 63, 1 << 64, -1 >> 1, 2.0 & 3, pcall(function() return 1.5 & 1 end))
print(math.ult(1, -1), math.ult(-1, 1), math.abs(-3), math.abs(-3.5), math.max(3, 7.5, -1), math.min(3, 7.5, -1), math.max(1))
print(math.floor(3.7), math.floor(-3.7), math.ceil(3.2), math.ceil(-3.2), math.floor(2 ^ 62), math.fmod(7, 3), math.fmod(-7, 3), math.fmod(7, -3), math.fmod(7.5, 2))
print(pcall(math.fmod, 1, 0), math.fmod(1, 0.0) ~= math.fmod(1, 0.0))
print(math.modf(3.7), math.modf(-3.7), math.modf(5), math.modf(math.huge), math.modf(-math.huge))
print(math.sqrt(16), math.sqrt(2), math.exp(0), math.exp(1), math.log(1), math.log(8, 2), math.log(100, 10), math.log(2.718281828459045))
print(math.sin(0), math.cos(0), math.tan(0), math.asin(1), math.acos(1), math.atan(1), math.atan(1, -1), math.atan(-1, -1))
print(math.deg(math.pi), math.rad(180), math.pi, -math.pi)
print(string.format("%.17g %.17g", 0.1 + 0.2, 1 / 3), 0.1 + 0.2 == 0.3, 0.1 + 0.2, 100 / 3, -0.0, 1e300 * 1e10)
print(255 // 16, 2 ^ -1, 8 % 3.5, -0.0 == 0.0, 1 / -0.0, 3 | 0, math.floor(-0.0))
math.randomseed(42)
local r = {}
for i = 1, 5 do r[i] = math.random(1, 100) end
print(table.concat(r, " "), math.random(10) <= 10, math.random() < 1, math.random(0) ~= nil)
math.randomseed(42)
print(math.random(1, 100) == r[1], pcall(math.random, 2, 1))
-- string.pack / unpack / packsize
local packed = string.pack("<i4 >i2 B z s1 d", -2, 513, 255, "zero", "len", 1.5)
print(#packed, string.unpack("<i4 >i2 B z s1 d", packed))
print(string.packsize("i4 i8 b h d"), string.packsize("!8 i1 i8"), string.pack(">I2", 258):byte(1, -1))
print(string.unpack("<I3", "\1\2\3"), string.unpack("j", string.pack("j", mini)), pcall(string.pack, "i1", 200))
print(string.unpack("z z", "ab\0cd\0"), string.pack("c5", "ab"):byte(1, -1))
-- integer loops with float steps, overflow-safe loops
local n = 0
for i = 1, 3, 0.5 do n = n + 1 end
for i = maxi - 2, maxi do n = n + 1 end
for i = mini, mini + 2 do n = n + 1 end
for i = 10, 1, -3 do n = n + 1 end
print(n, pcall(function() for i = 1, 10, 0 do end end))
