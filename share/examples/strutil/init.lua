-- strutil: small string helpers, returned as one module table.
local M = {}

-- s without leading and trailing white space
function M.trim(s)
	return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- the pieces of s between the separator sep (one plain character), empty pieces kept
function M.split(s, sep)
	local out = {}
	for piece in (s .. sep):gmatch("(.-)" .. sep:gsub("%p", "%%%0")) do
		out[#out + 1] = piece
	end
	return out
end

return M
