-- The sample job of the README: read the workspace, count words, write a report.
local notes = fs.read("/notes.txt")
local words = 0
for _ in notes:gmatch("%S+") do words = words + 1 end

local data = json.decode(fs.read("/data.json"))
print(("%s has %d words; %d items in data.json"):format("notes.txt", words, #data.items))

local hits = fs.grep("box")
return { words = words, items = data.items, lines_with_box = #hits }
