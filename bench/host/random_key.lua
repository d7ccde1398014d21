-- SPDX-License-Identifier: MIT
-- wrk script: every request looks up a random key of the LookupServer's map (ENTRIES from the environment).
local entries = tonumber(os.getenv("ENTRIES") or "1000000")
request = function()
  return wrk.format("GET", "/get?key=" .. math.random(0, entries - 1))
end
