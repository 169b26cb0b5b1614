-- The greet tool: box-run runs this file with the tool's input (already checked against
-- input_schema) as the global `input`, and returns what it returns as the tool's answer.
return {greeting = "hello " .. input.who}
