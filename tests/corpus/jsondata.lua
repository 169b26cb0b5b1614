-- JSON round trips of nested data: encode sorts keys and keeps integers exact, decode gives
-- tables back that encode to the same text.
local function dump(v, indent)
	indent = indent or ""
	if v == json.null then return "json.null" end
	if type(v) ~= "table" then
		if type(v) == "string" then return string.format("%q", v) end
		return tostring(v) .. (math.type(v) and ("<" .. math.type(v) .. ">") or "")
	end
	local keys = {}
	for k in pairs(v) do keys[#keys + 1] = k end
	table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
	local out = {}
	for _, k in ipairs(keys) do out[#out + 1] = indent .. "  " .. tostring(k) .. " = " .. dump(v[k], indent .. "  ") end
	return "{\n" .. table.concat(out, "\n") .. "\n" .. indent .. "}"
end
local doc = {
	name = "box", version = {0, 1, 0}, tags = {"lua", "json", "sandbox"},
	limits = {memory = 33554432, timeout_ms = 30000, ratio = 1.25, tiny = 1e-7, huge = 1e300},
	nested = {a = {b = {c = {d = {e = "deep"}}}}, list = {{id = 1}, {id = 2, extra = {true, false}}}},
	unicode = "héllo ☃ 𝄞", escapes = "quote\" backslash\\ newline\n tab\t ctl\1\31 del\127",
	big = 9007199254740993, neg = -9223372036854775807, float_int = 3.0, zero = 0, negzero = -0.0,
	empty_obj = json.object(), empty_arr = {}, null = json.null, mixed = {1, "two", 3.5, {4}},
	[1] = "int key", ["10"] = "string ten", [-5] = "negative",
}
local text = json.encode(doc)
print(text)
local back = json.decode(text)
print(json.encode(back) == text)
print(dump(back))
print(math.type(back.big), back.big, back.neg, math.type(back.float_int), back.float_int, back.null == json.null)
for _, t in ipairs({"{}", "[]", "[[],{},[{}]]", '{"a":[1,2,{"b":null}],"c":{"d":[]}}', "0", "-1.5e-3",
		'"\\u00e9\\ud834\\udd1e\\n"', "[1e2,1E+2,100,1.0]", "true", "null", '{"z":1,"a":2,"m":{"y":1,"b":2}}',
		"[9223372036854775807,-9223372036854775808,9223372036854775808]", '"\\/\\b\\f\\r\\t"'}) do
	local v = json.decode(t)
	print(t, "=>", json.encode(v), dump(v))
end
-- a generated tree, several levels deep and wide
local function tree(depth, width)
	if depth == 0 then return depth * width + 0.5 end
	local node = {level = depth, children = {}}
	for i = 1, width do node.children[i] = tree(depth - 1, width) end
	node["k" .. depth] = string.rep("v", depth)
	return node
end
local t1 = json.encode(tree(5, 4))
print(#t1, t1:sub(1, 120), json.encode(json.decode(t1)) == t1)
local arr = {}
for i = 1, 1000 do arr[i] = {i = i, sq = i * i, s = tostring(i), f = i / 8} end
local t2 = json.encode(arr)
print(#t2, t2:sub(-80), json.encode(json.decode(t2)) == t2)
-- base64 of binary data, round trip
local bin = {}
for i = 0, 255 do bin[#bin + 1] = string.char(i) end
bin = table.concat(bin)
for _, s in ipairs({"", "f", "fo", "foo", "foob", "fooba", "foobar", bin}) do
	local e = base64.encode(s)
	print(#s, #e, e:sub(1, 40), base64.decode(e) == s)
end
print(base64.decode("aGVsbG8gd29ybGQ="), base64.decode("aGk"), base64.encode(json.encode({a = 1})))
