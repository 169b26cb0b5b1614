-- utf8: characters, code points, lengths, offsets, the pattern, invalid input.
local s = "héllo wörld — ☃ 𝄞 日本語"
print(#s, utf8.len(s), utf8.len(""), utf8.len(s, 3), utf8.len(s, -4))
print(utf8.char(72, 233, 0x2603, 0x1D11E, 0x65E5), utf8.char(), utf8.char(0x7FFFFFFF):byte(1, -1))
print(utf8.codepoint(s, 1, 3), utf8.codepoint("€"), pcall(utf8.codepoint, s, 3))
local cps = {}
for p, c in utf8.codes(s) do cps[#cps + 1] = p .. ":" .. c end
print(table.concat(cps, " "))
print(utf8.offset(s, 1), utf8.offset(s, 3), utf8.offset(s, -1), utf8.offset(s, 0, 3), utf8.offset(s, 100))
print(utf8.len("\xff"), utf8.len("abc\xe2\x82"), utf8.len("\xed\xa0\x80"), utf8.len("\xed\xa0\x80", 1, -1, true))
print(pcall(function() for _ in utf8.codes("ab\xff") do end end))
local chars = {}
for ch in s:gmatch(utf8.charpattern) do chars[#chars + 1] = ch end
print(#chars, chars[2], chars[13], chars[#chars], #utf8.charpattern)
local function reverse_utf8(str)
	local t = {}
	for _, c in utf8.codes(str) do table.insert(t, 1, utf8.char(c)) end
	return table.concat(t)
end
print(reverse_utf8("añb☃c"), ("añb"):reverse() == reverse_utf8("añb"))
local function sub_utf8(str, i, j)
	return str:sub(utf8.offset(str, i), (utf8.offset(str, j + 1) or #str + 1) - 1)
end
print(sub_utf8(s, 7, 11), sub_utf8(s, 15, 17), sub_utf8("日本語テキスト", 2, 3))
print(("Ünïcödé"):upper(), ("ÀB"):lower(), ("日本"):len(), utf8.len("日本"))
print(utf8.codepoint("\u{10FFFF}"), "\u{48}\u{49}", #"\u{7FF}", #"\u{800}", #"\u{FFFF}", #"\u{10000}")
