-- The user id of a request, read as the aml_retriever server reads it, where HAProxy's own
-- converters cannot: loaded by haproxy.cfg, used only when they fail or may be wrong.
--
-- json_query (HAProxy's mjson) decodes a \u00XX escape to the single byte XX and gives up on
-- any other \uXXXX, so an id sent with JSON escapes (Python's json.dumps writes "café" as
-- "caf\u00e9") would hash as other bytes than the id's UTF-8; it also finds no user_id behind
-- a byte-order mark, an escaped key or nesting deeper than 20. url_dec refuses a path holding a
-- '%' not followed by two hex digits, which the server keeps as it is. These two functions
-- decode what the server decodes (validation.parse_json; urllib.parse.unquote), or find no
-- user id ("") when the server would refuse the request anyway (then a shard answers it 400).

local ESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n',
                  r = '\r', t = '\t' }

-- The JSON string starting at s[i] == '"': its decoded UTF-8 bytes and the index after it.
local function read_string(s, i)
  local parts, j = {}, i + 1
  while true do
    local k = s:find('["\\\0-\31]', j)
    if k == nil then return nil end
    local c = s:byte(k)
    if c == 34 then  -- the closing quote
      parts[#parts + 1] = s:sub(j, k - 1)
      return table.concat(parts), k + 1
    elseif c ~= 92 then  -- a raw control character: not JSON
      return nil
    end
    parts[#parts + 1] = s:sub(j, k - 1)
    local e = s:sub(k + 1, k + 1)
    if e == 'u' then
      local hex = s:match('^%x%x%x%x', k + 2)
      if hex == nil then return nil end
      local cp, after = tonumber(hex, 16), k + 6
      if cp >= 0xD800 and cp <= 0xDBFF then  -- a surrogate pair is one character
        local low = s:match('^\\u(%x%x%x%x)', after)
        local lo = low and tonumber(low, 16)
        if lo == nil or lo < 0xDC00 or lo > 0xDFFF then return nil end
        cp, after = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00), after + 6
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        return nil  -- a lone surrogate: the server refuses it
      end
      parts[#parts + 1] = utf8.char(cp)
      j = after
    elseif ESCAPES[e] then
      parts[#parts + 1] = ESCAPES[e]
      j = k + 2
    else
      return nil
    end
  end
end

-- The index after the JSON value starting at s[i] (an object, array, string or scalar).
local function skip_value(s, i)
  local c = s:sub(i, i)
  if c == '"' then
    local _, after = read_string(s, i)
    return after
  elseif c == '{' or c == '[' then
    local depth, j = 0, i
    while true do
      local k = s:find('[][{}"]', j)
      if k == nil then return nil end
      local d = s:sub(k, k)
      if d == '"' then
        local _, after = read_string(s, k)
        if after == nil then return nil end
        j = after
      else
        depth = depth + ((d == '{' or d == '[') and 1 or -1)
        j = k + 1
        if depth == 0 then return j end
      end
    end
  end
  local k = s:find('[,}%]%s]', i)  -- a number, true, false or null
  return k
end

local function skip_space(s, i)
  return s:find('[^ \t\r\n]', i)
end

-- The string value of the top-level key "user_id" of a JSON object, or nil.
local function body_user_id(body)
  if body == nil then return nil end
  local i = 1
  if body:sub(1, 3) == '\239\187\191' then i = 4 end  -- a UTF-8 byte-order mark
  i = skip_space(body, i)
  if i == nil or body:sub(i, i) ~= '{' then return nil end
  i = skip_space(body, i + 1)
  while i ~= nil and body:sub(i, i) == '"' do
    local key, after = read_string(body, i)
    if key == nil then return nil end
    i = skip_space(body, after)
    if i == nil or body:sub(i, i) ~= ':' then return nil end
    i = skip_space(body, i + 1)
    if i == nil then return nil end
    if key == 'user_id' then
      if body:sub(i, i) ~= '"' then return nil end
      return (read_string(body, i))
    end
    i = skip_value(body, i)
    i = i and skip_space(body, i)
    if i == nil or body:sub(i, i) ~= ',' then return nil end
    i = skip_space(body, i + 1)
  end
  return nil
end

-- Percent-decoding as urllib.parse.unquote does it: %XX (either case) becomes the byte,
-- anything else stays as it is.
local function unquote(text)
  return (text:gsub('%%(%x%x)', function(hex) return string.char(tonumber(hex, 16)) end))
end

-- A fetch cannot return "no sample" (nil arrives as the boolean false): no user id is "".
core.register_fetches('aml_body_user_id', function(txn)
  return body_user_id(txn.f:req_body()) or ''
end)

core.register_converters('aml_unquote', unquote)
