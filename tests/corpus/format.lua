-- string.format: every conversion, flags, widths and precisions.
local ints = {0, 1, -1, 42, 255, -255, 2147483647, math.maxinteger, math.mininteger}
for _, n in ipairs(ints) do
	print(string.format("%d|%5d|%-5d|%05d|%+d|% d|%i|%x|%X|%#x|%o|%#o|%u", n, n, n, n, n, n, n, n, n, n, n, n, n))
end
local floats = {0.0, -0.0, 1.0, -1.5, 3.14159265358979, 1e100, 1e-100, 123456789.125, 2^53, 1/3}
for _, f in ipairs(floats) do
	print(string.format("%f|%.2f|%10.3f|%-10.1f|%e|%.3E|%g|%G|%.10g|%a|%A|%+.0f", f, f, f, f, f, f, f, f, f, f, f, f))
end
print(string.format("%g %g %g %f", 1/0, -1/0, 1e15, 2^63))
print(string.format("%5.1s|%.3s|%-8s|%8s|%s", "abcdef", "abcdef", "ab", "ab", 12))
print(string.format("%c%c%c", 76, 117, 97), string.format("%5c|%-5c|", 65, 66))
print(string.format("%q", 'a "quoted"\n\0 string\r\\ \127 é'))
print(string.format("%q|%q|%q|%q|%q", 1, -7, 1.5, math.mininteger, 1/3))
print(string.format("%q %q", 1/0, -1/0), string.format("%q", 0/0):find("0/0") ~= nil)
print(string.format("%%|100%%"), pcall(string.format, "%5%"))
print(string.format("%s %s %s %s", nil, true, false, 1.25))
print(string.format("%d", 3.0), string.format("%x", 255.0), string.format("%.14g", 0.1))
print(string.format("%-+8.3f|%08.3f|% 08.2f", 3.14159, -3.14159, 2.5))
print(string.format("%.0f %.0f %.0f %.0f", 0.5, 1.5, 2.5, -0.5))
print(string.format("[%10.4s]", "truncate"))
print(string.format("%s", setmetatable({}, {__tostring = function() return "custom!" end})))
print(pcall(string.format, "%d", 1.5))
print(pcall(string.format, "%10", 1))
print(pcall(string.format, "%123d", 1))
print(pcall(string.format, "%w", 1))
print(#string.format("%099d", 7), #string.format("%.99f", 1))
