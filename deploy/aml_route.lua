-- The user id of a request, read as the aml_retriever server reads it: loaded by haproxy.cfg,
-- which routes every POST /add, /search and /delete_user by the body's user id read here, and a
-- /users/{user_id}... path by url_dec, or by unquote below where url_dec refuses (a '%' not
-- followed by two hex digits, which the server keeps as it is).
--
-- Why not HAProxy's own json_query: it decodes a \u00XX escape to the single byte XX and gives
-- up on any other \uXXXX, so an id sent with JSON escapes (Python's json.dumps writes "café" as
-- "caf\u00e9") would hash as other bytes than the id's UTF-8; it finds no user_id behind a
-- byte-order mark, an escaped key or nesting deeper than 20; and its cost grows with every
-- token of the body (16 ms of CPU for 1 MiB of `0,`). This reader decodes what the server
-- decodes (validation.parse_json, urllib.parse.unquote).
--
-- It runs before any shard has checked the request's API key, on bodies of up to
-- max_body_bytes that anyone may send, so its cost is bounded whatever the body:
--   * it looks for the top-level key "user_id" only: it moves from one structural byte
--     (" { } [ ]) to the next with string.find in plain mode (memchr, C speed), so a string is
--     skipped whole, \u escapes and all, never walked byte by byte in Lua;
--   * it decodes only the top-level keys that can read "user_id" (7 to 42 bytes between their
--     quotes: "\u0075\u0073..." spelled out) and the id itself (at most MAX_ID_BYTES);
--   * every step (a bracket, a string, an escaped quote or a backslash before one, a key
--     decoded) counts against MAX_STEPS. A body it cannot decide within them is NOT guessed
--     at: the answer is UNDECIDED and the router refuses the request 400, so a real user's
--     request never reaches another shard. A client avoids that by sending user_id before the
--     messages (every client of this project does): it is then found in a handful of steps.
-- Only bodies the server accepts must be read right: one it refuses (not JSON, not an object,
-- no string user_id, a repeated key) any shard refuses with the same 400, so the reader checks
-- nothing it does not need (what lies between tokens, for one).

-- Steps the body reader may take: a 200-message Add with role, content and a timestamp each
-- takes about 1,400 when user_id comes after the messages, 3 when it comes first. A step costs
-- 0.1-0.3 us of CPU, so the reader spends at most ~3 ms on a body (docs/RELIABILITY.md).
local MAX_STEPS = 10000
-- The longest a top-level key can be between its quotes and still read "user_id".
local MAX_KEY_BYTES = 42
-- The longest a user id can be between its quotes: 256 characters (the server's limit,
-- validation.ID_MAX_CHARS), each at most 12 bytes (a surrogate pair spelled as two \u
-- escapes); a longer one is refused by the server anyway.
local MAX_ID_BYTES = 256 * 12
-- Steps charged for decoding a top-level key of 8 to 42 bytes that may read "user_id".
local DECODE_STEPS = 40
-- What body_user_id answers when it cannot decide within its steps: the router refuses 400.
local UNDECIDED = {}
local HUGE = math.huge

local ESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n',
                  r = '\r', t = '\t' }

-- The decoded UTF-8 of the JSON string between s[i] == '"' and s[j] == '"' (its closing quote),
-- or nil when the server would refuse it (a raw control character, a bad or lone escape).
-- Called only on strings of at most MAX_ID_BYTES.
local function decode_string(s, i, j)
  local raw = s:sub(i + 1, j - 1)
  if raw:find('[\0-\31]') then return nil end  -- the server's JSON refuses raw controls
  if not raw:find('\\', 1, true) then return raw end
  local parts, k = {}, 1
  while true do
    local b = raw:find('\\', k, true)
    if b == nil then
      parts[#parts + 1] = raw:sub(k)
      return table.concat(parts)
    end
    parts[#parts + 1] = raw:sub(k, b - 1)
    local e = raw:sub(b + 1, b + 1)
    if e == 'u' then
      local hex = raw:match('^%x%x%x%x', b + 2)
      if hex == nil then return nil end
      local cp, after = tonumber(hex, 16), b + 6
      if cp >= 0xD800 and cp <= 0xDBFF then  -- a surrogate pair is one character
        local low = raw:match('^\\u(%x%x%x%x)', after)
        local lo = low and tonumber(low, 16)
        if lo == nil or lo < 0xDC00 or lo > 0xDFFF then return nil end
        cp, after = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00), after + 6
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        return nil  -- a lone surrogate: the server refuses it
      end
      parts[#parts + 1] = utf8.char(cp)
      k = after
    elseif ESCAPES[e] then
      parts[#parts + 1] = ESCAPES[e]
      k = b + 2
    else
      return nil
    end
  end
end

-- The index of the quote closing the JSON string that opens at s[i], or nil when the body ends
-- first, and the steps it took (its escaped quotes and the backslashes before them). A quote
-- after an odd run of backslashes is escaped; escapes elsewhere (\u and the rest) cost nothing:
-- the next quote is found by memchr.
local function string_end(s, i, budget)
  local j, steps = i + 1, 0
  while true do
    local q = s:find('"', j, true)
    if q == nil then return nil, steps end
    local b = q - 1
    while s:byte(b) == 92 do  -- s[i] is a quote: a run stops there at the latest
      b = b - 1
      steps = steps + 1
      if steps > budget then return UNDECIDED, steps end
    end
    if (q - 1 - b) % 2 == 0 then return q, steps end
    j = q + 1
  end
end

-- Whether the JSON string between the quotes s[k] and s[e] reads "user_id", decoded as the
-- server decodes it, and the steps that took.
local function reads_user_id(s, k, e)
  local length = e - k - 1
  if length == 7 then return s:sub(k + 1, e - 1) == 'user_id', 1 end
  if length < 7 or length > MAX_KEY_BYTES then return false, 0 end
  return decode_string(s, k, e) == 'user_id', DECODE_STEPS
end

-- The string value of the top-level key "user_id" of the JSON object `s`; false when a body the
-- server accepts cannot hold one (the server refuses the request: any shard may answer it); or
-- UNDECIDED. (Nothing between tokens is checked to be whitespace, nor anything else the server
-- checks: where a body is no JSON, the server refuses it.)
local function body_user_id(s)
  if s == nil then return false end
  local i = 1
  if s:sub(1, 3) == '\239\187\191' then i = 4 end  -- a UTF-8 byte-order mark
  -- The next position at or after i of each structural byte (HUGE: none after i). The scan
  -- moves forward only, so each is searched for again only once passed: memchr over the body,
  -- once per kind of byte.
  local q, o, a = s:find('"', i, true) or HUGE, s:find('{', i, true) or HUGE,
                  s:find('[', i, true) or HUGE
  if o == HUGE or q < o or a < o then return false end  -- not an object
  local co, ca = s:find('}', o, true) or HUGE, s:find(']', o, true) or HUGE
  local colon, comma = 0, 0  -- looked for only after a key that reads "user_id"
  local depth, steps = 0, 0
  i = o
  while true do
    steps = steps + 1
    if steps > MAX_STEPS then return UNDECIDED end
    if q < i then q = s:find('"', i, true) or HUGE end
    if o < i then o = s:find('{', i, true) or HUGE end
    if a < i then a = s:find('[', i, true) or HUGE end
    if co < i then co = s:find('}', i, true) or HUGE end
    if ca < i then ca = s:find(']', i, true) or HUGE end
    local n = q
    if o < n then n = o end
    if a < n then n = a end
    if co < n then n = co end
    if ca < n then n = ca end
    if n == HUGE then return false end  -- the body ends inside the object: no JSON
    if n == q then
      local e = s:find('"', q + 1, true)
      if e ~= nil and s:byte(e - 1) == 92 then  -- an escaped quote inside: the slow way
        local used
        e, used = string_end(s, q, MAX_STEPS - steps)
        steps = steps + used
        if e == UNDECIDED then return UNDECIDED end
      end
      if e == nil then return false end
      if depth == 1 then
        local named, used = reads_user_id(s, q, e)
        steps = steps + used
        if named then
          -- A key if a ':' comes before any ',' '}' or ']' (after a value, one of those comes
          -- first); its value a string if a quote comes first after the colon (a number or
          -- literal is followed by ',' or '}' first, an object or array starts with its
          -- bracket). All found by memchr from where the scan is, never scanned twice.
          if colon < e then colon = s:find(':', e, true) or HUGE end
          if comma < e then comma = s:find(',', e, true) or HUGE end
          if co < e then co = s:find('}', e, true) or HUGE end
          if ca < e then ca = s:find(']', e, true) or HUGE end
          if colon < comma and colon < co and colon < ca then
            local v = colon
            if q < v then q = s:find('"', v, true) or HUGE end
            if o < v then o = s:find('{', v, true) or HUGE end
            if a < v then a = s:find('[', v, true) or HUGE end
            if comma < v then comma = s:find(',', v, true) or HUGE end
            v = q
            if v == HUGE or o < v or a < v or comma < v or co < v or ca < v then
              return false  -- not a string: the server refuses it
            end
            local ve = s:find('"', v + 1, true)
            if ve ~= nil and s:byte(ve - 1) == 92 then
              ve = string_end(s, v, MAX_ID_BYTES)
              if ve == UNDECIDED then return UNDECIDED end
            end
            if ve == nil then return false end
            if ve - v - 1 > MAX_ID_BYTES then return UNDECIDED end
            return decode_string(s, v, ve) or false
          end
        end
      end
      i = e + 1
    elseif n == co or n == ca then
      depth = depth - 1
      if depth == 0 then return false end  -- the top-level object ended without user_id
      i = n + 1
    else
      depth = depth + 1
      i = n + 1
    end
  end
end

-- Percent-decoding as urllib.parse.unquote does it: %XX (either case) becomes the byte,
-- anything else stays as it is.
local function unquote(text)
  return (text:gsub('%%(%x%x)', function(hex) return string.char(tonumber(hex, 16)) end))
end

-- Sets txn.uid to the body's user id, or txn.unroutable when the reader cannot decide (the
-- router refuses 400); sets nothing when the body names no user (a shard refuses it).
core.register_action('aml_body_user', { 'http-req' }, function(txn)
  local found = body_user_id(txn.f:req_body())
  if found == UNDECIDED then
    txn:set_var('txn.unroutable', 1)
  elseif found then
    txn:set_var('txn.uid', found)
  end
end)

core.register_converters('aml_unquote', unquote)
