-- Writes R serialization (version 2, XDR) images for the reader's specs and
-- the fuzzer's seeds: just the item kinds a data frame of factors uses, plus
-- whatever raw bytes a test wants to splice in.
local W = {}

local function int(v) return string.pack(">i4", v) end
W.int = int
W.NA = -2147483648
W.NIL = int(254)

local ATTR, TAG, OBJ = 1 << 9, 1 << 10, 1 << 8

function W.charsxp(s)
  if s == nil then return int(9) .. int(-1) end
  return int(9 | (64 << 12)) .. int(#s) .. s
end

function W.sym(name) return int(1) .. W.charsxp(name) end

--- A pairlist of {tag, item bytes} entries.
function W.pairlist(entries)
  local out = {}
  for _, e in ipairs(entries) do out[#out + 1] = int(2 | TAG) .. W.sym(e[1]) .. e[2] end
  return table.concat(out) .. W.NIL
end

local function flags(kind, attrs, obj)
  return int(kind | (attrs and ATTR or 0) | (obj and OBJ or 0))
end

function W.strsxp(list, attrs)
  local out = { flags(16, attrs), int(#list) }
  for _, s in ipairs(list) do out[#out + 1] = W.charsxp(s) end
  return table.concat(out) .. (attrs and W.pairlist(attrs) or "")
end

function W.intsxp(vals, attrs, obj)
  local out = { flags(13, attrs, obj), int(#vals) }
  for _, v in ipairs(vals) do out[#out + 1] = int(v) end
  return table.concat(out) .. (attrs and W.pairlist(attrs) or "")
end

function W.vecsxp(items, attrs, obj)
  return flags(19, attrs, obj) .. int(#items) .. table.concat(items) .. (attrs and W.pairlist(attrs) or "")
end

function W.factor(codes, levels)
  return W.intsxp(codes, { { "levels", W.strsxp(levels) }, { "class", W.strsxp{ "factor" } } }, true)
end

--- cols: list of {name =, codes = {...}, levels = {...}} or {name =, raw = item bytes}
function W.frame(cols, n_rows)
  local items, names = {}, {}
  for i, c in ipairs(cols) do
    items[i] = c.raw or W.factor(c.codes, c.levels)
    names[i] = c.name
  end
  return W.vecsxp(items, {
    { "names", W.strsxp(names) },
    { "class", W.strsxp{ "data.frame" } },
    { "row.names", W.intsxp{ W.NA, -n_rows } },
  }, true)
end

--- The whole file image: header, version 2, and one named object.
function W.rda(name, item, version)
  return "RDX2\nX\n" .. int(version or 2) .. int(0x40000) .. int(0x20300) .. W.pairlist{ { name, item } }
end

function W.realsxp(vals, attrs, obj)
  local out = { flags(14, attrs, obj), int(#vals) }
  for _, v in ipairs(vals) do out[#out + 1] = string.pack(">d", v) end
  return table.concat(out) .. (attrs and W.pairlist(attrs) or "")
end

--- An ALTREP compact integer sequence start, start+1, ..., as R 3.5+ writes 1:n.
function W.compact_intseq(n, start)
  local info = int(2) .. W.sym("compact_intseq") .. int(2) .. W.sym("base") .. int(2) .. W.intsxp{ 13 } .. W.NIL
  return int(238) .. info .. W.realsxp{ n, start, 1 } .. W.NIL
end

--- A bare serialization (version 3, as in .rds files and lazy-load chunks).
function W.stream3(item)
  return "X\n" .. int(3) .. int(0x40202) .. int(0x30500) .. int(5) .. "UTF-8" .. item
end

--- An .rda image in version 3.
function W.rda3(name, item)
  return "RDX3\n" .. W.stream3(W.pairlist{ { name, item } })
end

--- A named list (VECSXP with names).
function W.named_list(entries)
  local items, names = {}, {}
  for i, e in ipairs(entries) do items[i], names[i] = e[2], e[1] end
  return W.vecsxp(items, { { "names", W.strsxp(names) } })
end

local function pipe(cmd, bytes)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(bytes)
  f:close()
  local p = assert(io.popen(cmd .. " < " .. tmp))
  local out = p:read("a")
  p:close()
  os.remove(tmp)
  return out
end

--- A lazy-load database of the given {name, item} data sets: the index
-- (.rdx, gzip) and the database (.rdb), chunks as R's compression 3 writes
-- them (4-byte length, type byte 'Z' for raw LZMA2 or '0' for none).
function W.lazy(entries, chunk_type)
  local rdb, vars = {}, {}
  local off = 0
  for _, e in ipairs(entries) do
    local body = W.stream3(e[2])
    local payload = chunk_type == "0" and body or pipe("xz -c --format=raw --lzma2=preset=6", body)
    local chunk = int(#body) .. (chunk_type or "Z") .. payload
    rdb[#rdb + 1] = chunk
    vars[#vars + 1] = { e[1], W.intsxp{ off, #chunk } }
    off = off + #chunk
  end
  local index = W.named_list{ { "variables", W.named_list(vars) }, { "references", W.named_list{} },
                              { "compressed", W.intsxp{ 3 } } }
  return pipe("gzip -c -n", W.stream3(index)), table.concat(rdb)
end

--- A small frame of two factors with one NA, used by the specs and seeds.
function W.tiny()
  return W.rda("Tiny", W.frame({
    { name = "class", codes = { 1, 2, 1 }, levels = { "edible", "poisonous" } },
    { name = "root", codes = { 2, W.NA, 1 }, levels = { "bulbous", "club" } },
  }, 3))
end

--- gzip-compresses bytes with the gzip tool (R's save() writes gzip by default).
function W.gzip(bytes) return pipe("gzip -c -n", bytes) end

--- xz-compresses bytes with the xz tool.
function W.xz(bytes)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(bytes)
  f:close()
  local p = assert(io.popen("xz -c --format=xz " .. tmp))
  local out = p:read("a")
  p:close()
  os.remove(tmp)
  return out
end

return W
