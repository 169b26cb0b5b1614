-- Recursion within the limits: deep, mutual, tail calls, memoised.
local function depth(n) if n == 0 then return 0 end return 1 + depth(n - 1) end
print(depth(10000), depth(50000))
local function tail(n, acc) if n == 0 then return acc end return tail(n - 1, acc + 1) end
print(tail(1000000, 0))
local is_even, is_odd
function is_even(n) if n == 0 then return true end return is_odd(n - 1) end
function is_odd(n) if n == 0 then return false end return is_even(n - 1) end
print(is_even(10000), is_odd(7777))
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
print(fib(24))
local memo = {}
local function mfib(n) if n < 2 then return n end if memo[n] then return memo[n] end local v = mfib(n - 1) + mfib(n - 2) memo[n] = v return v end
print(mfib(90))
local function ack(m, n)
	if m == 0 then return n + 1 end
	if n == 0 then return ack(m - 1, 1) end
	return ack(m - 1, ack(m, n - 1))
end
print(ack(2, 3), ack(3, 3))
local function hanoi(n, from, to, via, moves)
	if n == 0 then return moves end
	moves = hanoi(n - 1, from, via, to, moves)
	moves = moves + 1
	return hanoi(n - 1, via, to, from, moves)
end
print(hanoi(16, "a", "c", "b", 0))
local function perms(a, n, out)
	n = n or #a
	if n <= 1 then out[#out + 1] = table.concat(a) return out end
	for i = 1, n do
		a[n], a[i] = a[i], a[n]
		perms(a, n - 1, out)
		a[n], a[i] = a[i], a[n]
	end
	return out
end
local ps = perms({"a", "b", "c", "d"}, nil, {})
table.sort(ps)
print(#ps, table.concat(ps, " "))
-- a recursive descent parser and evaluator
local function eval(src)
	local pos = 1
	local expr
	local function peek() return src:match("^%s*(.)", pos) end
	local function take() local c, p = src:match("^%s*(.)()", pos) pos = p return c end
	local function atom()
		local c = peek()
		if c == "(" then take() local v = expr() take() return v end
		if c == "-" then take() return -atom() end
		local num, p = src:match("^%s*(%d+%.?%d*)()", pos)
		pos = p
		return tonumber(num)
	end
	local function term()
		local v = atom()
		while peek() == "*" or peek() == "/" do
			if take() == "*" then v = v * atom() else v = v / atom() end
		end
		return v
	end
	function expr()
		local v = term()
		while peek() == "+" or peek() == "-" do
			if take() == "+" then v = v + term() else v = v - term() end
		end
		return v
	end
	return expr()
end
print(eval("1 + 2 * 3"), eval("(1 + 2) * 3"), eval("-(4 - 6) * 2.5"), eval("10 / 4"), eval("((((7))))"))
-- (endless recursion is one of the differences: see differences.lua)
