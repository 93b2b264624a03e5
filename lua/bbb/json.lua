--- bbb.json: a deterministic JSON encoder (object keys sorted, floats in
-- the fewest digits that read back as the same double) and a guarded decoder.
-- Checkpoint headers and run logs use it, so the same state always gives
-- the same bytes.
local cjson = require "cjson"

local json = {}

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

local function encode_number(v, path)
  if math.type(v) == "integer" then return ("%d"):format(v) end
  if v ~= v or v == math.huge or v == -math.huge then
    error(("json: %s is %s, which JSON cannot hold"):format(path, tostring(v)), 0)
  end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%.1f"):format(v) end
  -- the shortest of 15, 16 or 17 digits that reads back as the same double
  for _, f in ipairs { "%.15g", "%.16g" } do
    local s = f:format(v)
    if tonumber(s) == v then return s end
  end
  return ("%.17g"):format(v)
end

local encode

local function is_array(t)
  local n = #t
  if n == 0 then return next(t) == nil end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

encode = function(v, path, depth, out)
  local ty = type(v)
  if depth > 64 then error(("json: %s is nested too deeply"):format(path), 0) end
  if ty == "nil" or v == json.null then out[#out + 1] = "null"   -- json.null: a lightuserdata
  elseif ty == "boolean" then out[#out + 1] = tostring(v)
  elseif ty == "number" then out[#out + 1] = encode_number(v, path)
  elseif ty == "string" then out[#out + 1] = encode_string(v)
  elseif ty == "table" then
    if v == json.null then out[#out + 1] = "null"; return end
    if v == json.empty_array then out[#out + 1] = "[]"; return end
    if is_array(v) and #v > 0 then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], path .. "[" .. i .. "]", depth + 1, out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then
          error(("json: %s has a key of type %s (only strings)"):format(path, type(k)), 0)
        end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(k)
        out[#out + 1] = ":"
        encode(v[k], path .. "." .. k, depth + 1, out)
      end
      out[#out + 1] = "}"
    end
  else
    error(("json: %s is a %s, which JSON cannot hold"):format(path, ty), 0)
  end
end

json.null = cjson.null
--- Encodes as [] (an empty Lua table encodes as {}).
json.empty_array = setmetatable({}, { __name = "json.empty_array" })

--- encode(value) -> string; errors name the offending path ("value.args.lr").
-- @usage
--   local s = bbb.json.encode{ lr = 0.001, sizes = { 784, 400 } }
--   assert(bbb.json.decode(s).sizes[2] == 400)
function json.encode(v)
  local out = {}
  local ok, err = pcall(encode, v, "value", 0, out)
  if not ok then error(err, 2) end
  return table.concat(out)
end

-- A private decoder: shallow nesting only, no exotic numbers.
local decoder = cjson.new()
decoder.decode_max_depth(32)
decoder.decode_invalid_numbers(false)

--- decode(string [, what]) -> value; invalid UTF-8, deep nesting and
-- malformed text are errors naming `what`.
-- @usage
--   assert(bbb.json.decode('{"a": [1, 2]}').a[2] == 2)
function json.decode(s, what)
  what = what or "json"
  if type(s) ~= "string" then error(("%s: expected a string, got %s"):format(what, type(s)), 2) end
  if not utf8.len(s) then error(("%s: the text is not valid UTF-8"):format(what), 2) end
  local ok, v = pcall(decoder.decode, s)
  if not ok then error(("%s: %s"):format(what, tostring(v):gsub("^.-: ", "")), 2) end
  return v
end

return json
