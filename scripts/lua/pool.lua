-- pool.lua: an example Lua provider (docs/lua-plugins.md).
--
-- Hands out existing machines from a fixed list of addresses instead of
-- creating virtual machines: CREATE picks a free address, CONFIRM reports how
-- to reach it, DELETE gives it back (there is nothing to tear down).
--
-- The plugin keeps no state of its own (each run may get a different Lua
-- state): an address is free when no other node of the cluster holds it, as
-- the task's `nodes` list says; without one, the node id picks the address.

-- Where an earlier task's result can be: at the top of the task, or under
-- "results" / "node" (the job engine's layouts).
local function earlier(task, key)
  local j = task.json
  if j[key] ~= nil then return j[key] end
  if type(j.results) == "table" and j.results[key] ~= nil then return j.results[key] end
  if type(j.node) == "table" and j.node[key] ~= nil then return j.node[key] end
  return nil
end

local function taken_by_others(task)
  local taken = {}
  if type(task.json.nodes) == "table" then
    for _, node in ipairs(task.json.nodes) do
      if type(node) == "table" and node.id ~= task.json.node_id and node.access_v4 then
        taken[node.access_v4] = true
      end
    end
  end
  return taken
end

-- A small stable hash of a string, to spread nodes over the list.
local function hash(s)
  local h = 5381
  for i = 1, #s do h = (h * 33 + string.byte(s, i)) % 2147483647 end
  return h
end

local function pick(task)
  local addresses = task.fields.addresses
  if type(addresses) ~= "table" or #addresses == 0 then
    error("field 'addresses' lists no machines; give the provider a list such as [\"10.0.0.5\", \"10.0.0.6\"]")
  end
  local taken = taken_by_others(task)
  local start = hash(task.json.node_id or "") % #addresses
  for i = 0, #addresses - 1 do
    local candidate = addresses[(start + i) % #addresses + 1]
    if not taken[candidate] then return candidate end
  end
  error("all " .. #addresses .. " addresses of the pool are in use; add machines to field 'addresses'")
end

return {
  type = "static-pool",
  kind = "provider",
  version = "1.0",
  description = "Hands out existing machines from a list of addresses",
  fields = {
    addresses = { label = "Addresses", type = "json", required = true,
                  description = "The machines of the pool, as a JSON list of IPv4 addresses" },
    ssh_user = { label = "SSH user", type = "string", default = "root" },
    ssh_port = { label = "SSH port", type = "integer", default = 22 },
  },
  actions = {
    create = function(task)
      local address = pick(task)
      task:log("info", "node " .. tostring(task.json.node_id) .. " gets " .. address)
      task:set_result("provider_id", "static-pool:" .. address)
      task:set_result("ssh_auth", { user = task.fields.ssh_user, port = task.fields.ssh_port })
      task:progress(100, "picked " .. address)
    end,
    confirm = function(task)
      local id = earlier(task, "provider_id")
      if type(id) ~= "string" or not id:find("^static%-pool:") then
        error("CONFIRM needs the provider_id CREATE returned (static-pool:<address>); got " .. tostring(id))
      end
      local address = id:sub(#"static-pool:" + 1)
      task:set_result("access_v4", address)
      task:set_result("bind_v4", address)
      task:set_result("hostname", task.json.hostname or address)
      task:set_result("ssh_user", task.fields.ssh_user)
      task:progress(100, "confirmed " .. address)
    end,
    delete = function(task)
      local id = earlier(task, "provider_id")
      task:log("info", "released " .. tostring(id) .. " back to the pool (the machine keeps running)")
    end,
  },
}
