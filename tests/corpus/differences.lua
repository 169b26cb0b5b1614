-- What box-run does differently from lua5.4 on purpose (box-run(1), DIFFERENCES FROM LUA).
-- Run by tests/corpus.bats under both: box-run's output must be differences.expected, and
-- every line must differ from the line lua5.4 prints (in the same environment, prelude.lua).
local t = {}
print("tostring numbers objects as first shown", tostring(t), tostring(print), tostring(t))
print("print and %s show the same numbers", string.format("%s", t), select("#", tostring(t)))
print("%p is refused", pcall(string.format, "%p", t))
print("the string metatable is hidden", getmetatable(""))
print("json.null is a light userdata", type(json.null), tostring(json.null))
print("invalid UTF-8 printed becomes U+FFFD", "\xff\xfe", utf8.charpattern)
