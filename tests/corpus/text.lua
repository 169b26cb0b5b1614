-- Text processing: patterns, captures, gsub with strings, tables and functions, gmatch.
local text = [[
The quick brown fox jumps over the lazy dog.
Pack my box with five dozen liquor jugs!
How vexingly quick daft zebras jump; the fox is QUICK too.
name=alice; age=31; city=Paris
name=bob; age=27; city=Berlin
]]

-- word frequencies, sorted by count then word
local freq = {}
for word in text:gmatch("%a+") do
	local w = word:lower()
	freq[w] = (freq[w] or 0) + 1
end
local words = {}
for w, n in pairs(freq) do words[#words + 1] = {w, n} end
table.sort(words, function(a, b) if a[2] ~= b[2] then return a[2] > b[2] end return a[1] < b[1] end)
for i = 1, 8 do print(words[i][1], words[i][2]) end

-- key=value records
for rec in text:gmatch("[^\n]+") do
	if rec:find("^name=") then
		local t = {}
		for k, v in rec:gmatch("(%w+)=(%w+)") do t[k] = v end
		print(string.format("%-6s %3d %s", t.name, tonumber(t.age), t.city))
	end
end

-- gsub with a function, a table, a string with captures, and a limit
print((text:gsub("%a+", function(w) if #w > 5 then return w:upper() end end)))
print((("$name is $age"):gsub("%$(%w+)", {name = "carol", age = 40})))
print(("hello world from lua"):gsub("(%w+) (%w+)", "%2 %1"))
print(("aaa"):gsub("a", "b", 2))
print(("abc"):gsub("", "-"))
print(("x = 1, y = 22, z = 333"):gsub("%d+", function(d) return "<" .. #d .. ">" end))
print(("%d"):gsub("%%", "%%%%"))

-- find, match, positions, anchors, plain find
print(text:find("fox"), text:find("fox", 20), text:find("f.x", 1, true), text:find("%.$"))
print(("[test]"):find("[", 1, true), ("a.b.c"):find(".", 2, true))
print(("  trim me  "):match("^%s*(.-)%s*$") .. "|")
print(("2024-02-29T13:45:07Z"):match("(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)"))
print(("key = value"):match("()(%w+)()"))
print(("f(a(b)c)d"):match("%b()"), ("THE (quick) fox"):find("%f[%a]%a+%f[%A]"))
print(("hello"):match(".-(l+)(.*)"))
print(string.find("abc", "b", -1), string.find("abc", "", 10), string.find("abc", "", 4))

-- byte, char, rep, reverse, sub with negatives, len, upper, lower
local s = "Lua 5.4"
print(s:byte(1, -1))
print(string.char(72, 105, 33), s:rep(3, ", "), s:reverse(), s:sub(-3), s:sub(2, -2), s:sub(10))
print(#s, s:len(), s:upper(), s:lower(), ("x"):rep(0), ("ab"):rep(3))

-- CSV with quoted fields
local function csv(line)
	local out, pos = {}, 1
	while pos <= #line + 1 do
		if line:sub(pos, pos) == '"' then
			local val, i = "", pos + 1
			while true do
				local q = line:find('"', i, true)
				if line:sub(q + 1, q + 1) == '"' then
					val = val .. line:sub(i, q) i = q + 2
				else
					val = val .. line:sub(i, q - 1) pos = q + 2 break
				end
			end
			out[#out + 1] = val
		else
			local c = line:find(",", pos, true) or #line + 1
			out[#out + 1] = line:sub(pos, c - 1)
			pos = c + 1
		end
	end
	return out
end
for _, l in ipairs({'a,b,c', '"x, y",2,"say ""hi"""', ',,', 'single'}) do
	print(table.concat(csv(l), "|"))
end

-- a small template engine and a tokenizer
local tpl = "Dear {{name}}, you owe {{ amount }} {{currency}}.{{missing}}"
print((tpl:gsub("{{%s*(%w+)%s*}}", {name = "Dana", amount = 12.5, currency = "EUR"})))
local tokens = {}
for num, op in ("12+3*(40-5)/7"):gmatch("(%d*)([%+%-%*/%(%)]?)") do
	if num ~= "" then tokens[#tokens + 1] = num end
	if op ~= "" then tokens[#tokens + 1] = op end
end
print(table.concat(tokens, " "))
-- gmatch with an anchor and an init position
for k in ("one two three"):gmatch("%a+", 5) do io_write = (io_write or "") .. k .. ";" end
print(io_write)
