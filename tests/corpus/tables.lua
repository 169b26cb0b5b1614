-- table.sort with comparators, the table library, and large tables.
local function show(t) local o = {} for i = 1, #t do o[i] = tostring(t[i]) end return table.concat(o, " ") end
local nums = {}
local seed = 12345
local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n end
for i = 1, 40 do nums[i] = rnd(100) end
local a = table.move(nums, 1, #nums, 1, {})
table.sort(a)
print(show(a))
table.sort(a, function(x, y) return x > y end)
print(show(a))
local people = {{"ann", 31}, {"bob", 25}, {"cid", 31}, {"dee", 19}, {"eve", 25}, {"fay", 40}}
table.sort(people, function(p, q) if p[2] ~= q[2] then return p[2] < q[2] end return p[1] > q[1] end)
for _, p in ipairs(people) do io_line = (io_line or "") .. p[1] .. ":" .. p[2] .. " " end
print(io_line)
local strs = {"banana", "Apple", "cherry", "apple", "Banana", "10", "9", "", "zeta"}
table.sort(strs)
print(show(strs))
table.sort(strs, function(x, y) return x:lower() < y:lower() or (x:lower() == y:lower() and x < y) end)
print(show(strs))
print(pcall(table.sort, {3, 1, 2}, function(x, y) return true end))
print(pcall(table.sort, {1, "x", 2}))

-- insert, remove, concat, pack, unpack, move
local t = {}
for i = 1, 10 do table.insert(t, i * i) end
table.insert(t, 1, 0)
table.insert(t, 5, -1)
print(show(t), #t)
print(table.remove(t), table.remove(t, 1), table.remove(t, 4), #t)
print(table.concat(t, ","), table.concat(t, "-", 3, 5), table.concat({}, "x"), table.concat({1, 2.5, "s"}))
local p = table.pack(1, nil, 3, nil)
print(p.n, p[1], p[2], p[3], p[4])
print(table.unpack({1, 2, 3}), table.unpack({1, 2, 3}, 2), table.unpack({1, 2, 3}, 2, 5))
print(show(table.move({1, 2, 3, 4, 5}, 2, 4, 1)), show(table.move({1, 2, 3}, 1, 3, 3)))
print(pcall(table.insert, {}, 5, 1), pcall(table.concat, {{}}))
local e = {}
print(table.remove(e), #e, table.remove({}, 0))

-- a large array and a large hash
local big = {}
for i = 1, 200000 do big[i] = i % 7 end
local sum = 0
for i = 1, #big do sum = sum + big[i] end
print(#big, sum)
local hash = {}
for i = 1, 100000 do hash["k" .. i] = i end
local count, hsum = 0, 0
for k, v in pairs(hash) do count = count + 1 hsum = hsum + v end
print(count, hsum, hash.k1, hash.k100000, hash.k100001)
for i = 1, 100000, 2 do hash["k" .. i] = nil end
count = 0
for _ in pairs(hash) do count = count + 1 end
print(count)
-- sparse arrays, # of a proper sequence, nested tables
local grid = {}
for y = 1, 50 do grid[y] = {} for x = 1, 50 do grid[y][x] = (x * y) % 10 end end
local diag = 0
for i = 1, 50 do diag = diag + grid[i][i] end
print(diag, #grid, #grid[50])
-- next, ipairs stopping at nil, pairs order of a sequence
local seq = {10, 20, 30, nil, 50}
local n = 0
for i, v in ipairs(seq) do n = n + 1 end
print(n, next({}), next({5}), select("#", next({})))
local order = {}
for k, v in pairs({"a", "b", "c", "d"}) do order[#order + 1] = k .. v end
print(table.concat(order, ","))
print(rawlen({1, 2, 3}), rawlen("abcd"), rawequal(t, t), rawequal({}, {}), rawget({5}, 1))
