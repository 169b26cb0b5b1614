-- Long outputs: lines from 1 byte to 1 MiB, many arguments per print, about 2.3 MiB in all.
for _, n in ipairs({1, 100, 1023, 1024, 1025, 4095, 4096, 8192, 65536, 100000, 1048576}) do
	local line = string.rep(string.char(97 + n % 26), n)
	print(line)
	print(#line, line:sub(1, 3))
end
local parts = {}
for i = 1, 300 do parts[i] = string.rep(tostring(i % 10), i) end
print(table.unpack(parts))
print(table.concat(parts, "\n"))
for i = 1, 2000 do print(i, i * i, ("-"):rep(i % 80)) end
local big = {}
for i = 1, 5000 do big[#big + 1] = string.format("%05d:%s", i, ("x"):rep(i % 50)) end
print(table.concat(big, " "))
print(("é"):rep(30000))
print("", nil, false, "", 0)
print()
