-- json and base64 for plain lua5.4, written from the rules of box-run(1) alone (not from its
-- C code), so that the corpus compares box-run's cJSON-based library with an independent
-- reading of the same rules: sorted keys, exact integers, the shortest float that reads back,
-- __jsontype, objects that json.decode made staying objects.
local json, base64 = {}, {}
local object_mt = {__jsontype = "object"}
local array_mt = {__jsontype = "array"}
json.null = setmetatable({}, {__tostring = function() return "json.null" end})

function json.object(t) return setmetatable(t or {}, object_mt) end
function json.array(t) return setmetatable(t or {}, array_mt) end

local escapes = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r",
	["\t"] = "\\t", ["\b"] = "\\b", ["\f"] = "\\f"}

local function enc_string(s)
	return '"' .. s:gsub('[%c"\\]', function(c)
		if c == "\127" then return c end
		return escapes[c] or string.format("\\u%04x", c:byte())
	end) .. '"'
end

local function enc_number(n)
	if math.type(n) == "integer" then return string.format("%d", n) end
	if n ~= n or n == math.huge or n == -math.huge then
		error("cannot convert NaN or infinity to JSON")
	end
	local s
	for prec = 15, 17 do
		s = string.format("%." .. prec .. "g", n)
		if tonumber(s) == n then break end
	end
	if not s:find("[.eE]") then s = s .. ".0" end
	return s
end

local encode

local function enc_table(t, depth)
	local mt = getmetatable(t)
	local kind = type(mt) == "table" and rawget(mt, "__jsontype")
	local count, maxi, is_array = 0, 0, true
	for k in next, t do
		count = count + 1
		if math.type(k) == "integer" and k >= 1 then
			if k > maxi then maxi = k end
		else
			is_array = false
		end
	end
	local seq = is_array and maxi == count
	if kind == "array" and not seq then error("table marked as an array is not a sequence") end
	if kind ~= "object" and (count == 0 or seq) then
		local out = {}
		for i = 1, count do out[i] = encode(rawget(t, i), depth + 1) end
		return "[" .. table.concat(out, ",") .. "]"
	end
	local keys = {}
	for k in next, t do
		if type(k) == "string" then keys[#keys + 1] = {k, k}
		elseif math.type(k) == "integer" then keys[#keys + 1] = {string.format("%d", k), k}
		else error("table key is not a string or an integer") end
	end
	table.sort(keys, function(a, b) return a[1] < b[1] end)
	local out = {}
	for i, kv in ipairs(keys) do
		out[i] = enc_string(kv[1]) .. ":" .. encode(rawget(t, kv[2]), depth + 1)
	end
	return "{" .. table.concat(out, ",") .. "}"
end

function encode(v, depth)
	if depth > 100 then error("value nested too deeply") end
	local t = type(v)
	if v == nil or v == json.null then return "null"
	elseif t == "boolean" then return tostring(v)
	elseif t == "number" then return enc_number(v)
	elseif t == "string" then return enc_string(v)
	elseif t == "table" then return enc_table(v, depth)
	end
	error("cannot convert a " .. t .. " to JSON")
end

function json.encode(v) return encode(v, 0) end

function json.decode(s)
	local pos = 1
	local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
	local function fail(what) error("json.decode: " .. what .. " at " .. pos, 0) end
	local value
	local function str()
		local out = {}
		pos = pos + 1
		while true do
			local c = s:sub(pos, pos)
			if c == "" then fail("unterminated string") end
			if c == '"' then pos = pos + 1 return table.concat(out) end
			if c == "\\" then
				local e = s:sub(pos + 1, pos + 1)
				local simple = {b = "\b", f = "\f", n = "\n", r = "\r", t = "\t",
					['"'] = '"', ["\\"] = "\\", ["/"] = "/"}
				if simple[e] then
					out[#out + 1] = simple[e]
					pos = pos + 2
				elseif e == "u" then
					local cp = tonumber(s:sub(pos + 2, pos + 5), 16)
					pos = pos + 6
					if cp >= 0xD800 and cp < 0xDC00 and s:sub(pos, pos + 1) == "\\u" then
						local lo = tonumber(s:sub(pos + 2, pos + 5), 16)
						cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
						pos = pos + 6
					end
					out[#out + 1] = utf8.char(cp)
				else
					fail("bad escape")
				end
			else
				local stop = s:find('["\\]', pos) or #s + 1
				out[#out + 1] = s:sub(pos, stop - 1)
				pos = stop
			end
		end
	end
	function value()
		ws()
		local c = s:sub(pos, pos)
		if c == "{" then
			local t = json.object()
			pos = pos + 1
			ws()
			if s:sub(pos, pos) == "}" then pos = pos + 1 return t end
			while true do
				ws()
				local k = str()
				ws()
				if s:sub(pos, pos) ~= ":" then fail("':' expected") end
				pos = pos + 1
				t[k] = value()
				ws()
				c = s:sub(pos, pos)
				pos = pos + 1
				if c == "}" then return t end
				if c ~= "," then fail("',' expected") end
			end
		elseif c == "[" then
			local t, n = {}, 0
			pos = pos + 1
			ws()
			if s:sub(pos, pos) == "]" then pos = pos + 1 return t end
			while true do
				n = n + 1
				t[n] = value()
				ws()
				c = s:sub(pos, pos)
				pos = pos + 1
				if c == "]" then return t end
				if c ~= "," then fail("',' expected") end
			end
		elseif c == '"' then
			return str()
		elseif s:find("^true", pos) then pos = pos + 4 return true
		elseif s:find("^false", pos) then pos = pos + 5 return false
		elseif s:find("^null", pos) then pos = pos + 4 return json.null
		end
		local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
		if not num or num == "" then fail("unexpected character") end
		pos = pos + #num
		local v = tonumber(num)
		if math.type(v) == "integer" and num:find("[.eE]") then return v + 0.0 end
		return v
	end
	local v = value()
	ws()
	if pos <= #s then fail("trailing text") end
	return v
end

local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

function base64.encode(s)
	return (s:gsub("..?.?", function(chunk)
		local a, b, c = chunk:byte(1, 3)
		local n = a * 65536 + (b or 0) * 256 + (c or 0)
		local out = {}
		for i = 1, 4 do
			local d = (n >> (6 * (4 - i))) & 63
			out[i] = b64:sub(d + 1, d + 1)
		end
		if not b then out[3], out[4] = "=", "="
		elseif not c then out[4] = "=" end
		return table.concat(out)
	end))
end

function base64.decode(s)
	s = s:gsub("=+$", "")
	local bits = s:gsub(".", function(ch)
		local d = b64:find(ch, 1, true) - 1
		local out = {}
		for i = 5, 0, -1 do out[#out + 1] = (d >> i) & 1 end
		return table.concat(out)
	end)
	bits = bits:sub(1, #bits - #bits % 8)
	return (bits:gsub("%d%d%d%d%d%d%d%d", function(byte)
		return string.char(tonumber(byte, 2))
	end))
end

return {json = json, base64 = base64}
