-- pool.lua: an example Lua provider (docs/lua-plugins.md) that hands out
-- existing SSH machines from a list.
--
-- CREATE gives the node one machine of the pool and returns how to reach it;
-- CONFIRM logs in over SSH (host key checked) to prove it is the machine the
-- pool describes and reports a few facts about it; DELETE runs an optional
-- clean-up command there and lets the machine go (it keeps running).
--
-- A Lua plugin has no files, so the pool records no allocations: it hands each
-- node of a cluster a different machine, worked out from the task alone (see
-- allocate below), but two clusters given the same pool can share machines.
-- For a pool shared by several clusters use the native `static` provider,
-- which records claims on disk.
--
--   {"name": "lab", "providertype": "static-pool", "provisioner": {
--     "hosts": [{"address": "10.0.0.5", "user": "weft",
--                "host_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA..."]},
--               {"address": "10.0.0.6", "port": 2222,
--                "host_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA..."]}],
--     "ssh_key": "-----BEGIN OPENSSH PRIVATE KEY-----\n...",
--     "release_command": "rm -rf /srv/app"}}

local PREFIX = "static-pool:"

-- A fact an earlier task of the node returned (CREATE's provider_id, ...):
-- at the top of the task, or under "results" / "node" / "node.results".
local function earlier(task, key)
  local j = task.json
  local node_results = type(j.node) == "table" and j.node.results or nil
  for _, where in ipairs({ j, j.results, j.node, node_results }) do
    if type(where) == "table" and where[key] ~= nil and where[key] ~= "" then return where[key] end
  end
  return nil
end

-- The pool, checked: a list of { address, port, user, host_keys, id }.
local function parse_hosts(task)
  local hosts = task.fields.hosts
  if type(hosts) == "string" then
    local ok, decoded = pcall(weft.json_decode, hosts)
    if not ok then error("field 'hosts' is a string but not a JSON list; give the list itself") end
    hosts = decoded
  end
  if type(hosts) ~= "table" or #hosts == 0 then
    error("field 'hosts' lists no machines; give a list such as "
          .. "[{\"address\": \"10.0.0.5\", \"host_keys\": [\"ssh-ed25519 AAAA...\"]}]")
  end
  local known = { address = true, port = true, user = true, host_keys = true }
  local list, seen = {}, {}
  for i, h in ipairs(hosts) do
    local where = "field 'hosts' entry " .. i
    if type(h) ~= "table" then
      error(where .. " must be an object {address, port?, user?, host_keys}, not a " .. type(h)
            .. " (Weft never connects without checking the host key, so give the keys with the address)")
    end
    for k in pairs(h) do
      if not known[k] then
        error(where .. " has an unknown key '" .. tostring(k) .. "'; the keys are address, port, user and host_keys")
      end
    end
    if type(h.address) ~= "string" or not string.match(h.address, "^%d+%.%d+%.%d+%.%d+$") then
      error(where .. " needs an IPv4 address, such as \"address\": \"10.0.0.5\"")
    end
    local port = h.port or 22
    if math.type(port) ~= "integer" or port < 1 or port > 65535 then
      error(where .. " has a port that is not an integer from 1 to 65535")
    end
    if h.user ~= nil and (type(h.user) ~= "string" or h.user == "") then
      error(where .. " has a user that is not a name")
    end
    local keys = h.host_keys
    if type(keys) == "string" then keys = { keys } end
    if type(keys) ~= "table" or #keys == 0 then
      error(where .. " has no host_keys; list the machine's public host keys (\"ssh-ed25519 AAAA...\", from "
            .. "/etc/ssh/ssh_host_ed25519_key.pub there): Weft never connects without checking them")
    end
    local clean = {}
    for j, k in ipairs(keys) do
      local kind, blob
      if type(k) == "string" then kind, blob = string.match(k, "^%s*(%S+)%s+(%S+)") end
      if not kind then error(where .. " host_keys[" .. j .. "] is not a key of the form \"type base64\"") end
      clean[j] = kind .. " " .. blob  -- without the comment, as the SSH service compares them
    end
    if seen[h.address] then
      error(where .. " repeats the address " .. h.address .. "; this provider tells machines apart by address")
    end
    seen[h.address] = true
    list[#list + 1] = { address = h.address, port = port, user = h.user or "root", host_keys = clean,
                        id = PREFIX .. h.address .. ":" .. port }
  end
  return list
end

local function find(hosts, id)
  for _, h in ipairs(hosts) do
    if h.id == id then return h end
  end
  return nil
end

-- Which machine the node gets, from the task alone. The nodes of the cluster
-- that hold a machine show it in task.json.nodes (their access_v4); the nodes
-- still waiting for one are sorted by id, and the k-th of them gets the k-th
-- free machine. Nodes created at the same time thus never pick the same one,
-- whichever of them sees the others' CREATE finished: when one of them gets
-- its machine, it leaves both the waiting list and the free list, and every
-- other node's pick stays the same.
local function allocate(task, hosts)
  local me = tostring(task.json.node_id)
  local held = find(hosts, earlier(task, "provider_id") or "")
  if held then return held end  -- a retried CREATE keeps its machine
  if task.json.nodes_omitted then
    error("the task does not list the cluster's nodes (the cluster is larger than weftd's [jobs] "
          .. "max_nodes_in_task), so the pool cannot tell which machines are taken; raise that limit")
  end
  local taken, waiting = {}, { me }
  for _, n in ipairs(task.json.nodes or {}) do
    if type(n) == "table" and n.id ~= nil and tostring(n.id) ~= me then
      if type(n.access_v4) == "string" and n.access_v4 ~= "" then
        taken[n.access_v4] = tostring(n.id)
      else
        table.insert(waiting, tostring(n.id))
      end
    end
  end
  table.sort(waiting)
  local rank = 0
  for i, id in ipairs(waiting) do
    if id == me then rank = i end
  end
  local free = {}
  for _, h in ipairs(hosts) do
    if not taken[h.address] then table.insert(free, h) end
  end
  if rank > #free then
    local held_by = {}
    for address, id in pairs(taken) do table.insert(held_by, address .. " (" .. id .. ")") end
    table.sort(held_by)
    error("static pool exhausted: its " .. #hosts .. " machines cannot serve " .. #waiting
          .. " more node(s) besides those already placed" .. (#held_by > 0 and (": " .. table.concat(held_by, ", ")) or "")
          .. "; add machines to the provider's 'hosts' field or make the cluster smaller")
  end
  return free[rank]
end

local function report(task, h)
  task:set_result("access_v4", h.address)
  task:set_result("bind_v4", h.address)
  task:set_result("ssh_port", h.port)
  task:set_result("host_keys", weft.array(h.host_keys))
end

return {
  type = "static-pool",
  kind = "provider",
  version = "2.0",
  description = "Hands out existing SSH machines from a list; each node of a cluster gets its own",
  fields = {
    hosts = { label = "Machines", type = "json", required = true,
              description = "list of {address, port?, user?, host_keys}, or that list as JSON text" },
    ssh_key = { label = "SSH private key", type = "string", required = true, sensitive = true,
                description = "private key (OpenSSH or PEM text, ed25519 or ECDSA) that logs in to every machine" },
    release_command = { label = "Release command", type = "string",
                        description = "run on the machine at DELETE (say, to remove what the cluster installed)" },
  },
  actions = {
    create = function(task)
      local hosts = parse_hosts(task)
      if not string.find(task.fields.ssh_key, "PRIVATE KEY", 1, true) then
        error("field 'ssh_key' does not hold a private key (OpenSSH or PEM text)")  -- never show the value
      end
      local h = allocate(task, hosts)
      task:log("info", "node " .. tostring(task.json.node_id) .. " gets " .. h.id)
      task:set_result("provider_id", h.id)
      task:set_result("ssh_auth", { user = h.user, private_key = task.fields.ssh_key })
      -- Already now, so that CONFIRM's task can reach the machine and other
      -- nodes of the cluster see it taken.
      report(task, h)
      task:progress(100, "picked " .. h.id)
    end,

    confirm = function(task)
      local hosts = parse_hosts(task)
      local id = earlier(task, "provider_id")
      local h = find(hosts, id or "")
      if not h then
        error("node " .. tostring(task.json.node_id) .. " holds " .. tostring(id)
              .. ", which is not in the pool's 'hosts' (any more); run CREATE again")
      end
      local keys = earlier(task, "host_keys")
      if earlier(task, "access_v4") ~= h.address or type(keys) ~= "table"
          or table.concat(keys, ",") ~= table.concat(h.host_keys, ",") then
        error("the pool entry " .. h.id .. " changed since CREATE (address or host keys); run CREATE again")
      end
      -- Logging in proves the address answers with the host key the pool lists.
      local r = task:exec("hostname; uname -sr; nproc 2>/dev/null || echo 0", { timeout_ms = 30000 })
      if not r.ok then
        error("machine " .. h.id .. " accepted the login, but the check command exited with status " .. r.status
              .. ": " .. string.sub(r.stderr, 1, 300))
      end
      local lines = {}
      for line in string.gmatch(r.stdout, "[^\n]+") do table.insert(lines, line) end
      report(task, h)
      task:set_result("hostname", task.json.hostname or lines[1] or h.address)
      local cpus = tonumber(lines[3] or "")
      task:set_result("facts", { hostname = lines[1], kernel = lines[2], cpus = cpus and math.tointeger(cpus) })
      task:progress(100, "confirmed " .. h.id .. " (" .. tostring(lines[1]) .. ")")
    end,

    delete = function(task)
      local id = earlier(task, "provider_id")
      if not id then
        task:log("info", "node " .. tostring(task.json.node_id) .. " holds no machine; nothing to release")
        return
      end
      local command = task.fields.release_command
      if command and command ~= "" then
        if earlier(task, "access_v4") and earlier(task, "ssh_auth") and earlier(task, "host_keys") then
          local r = task:exec(command, { timeout_ms = 300000 })
          if r.stdout ~= "" then task:log("info", r.stdout) end
          if not r.ok then
            error("release_command on " .. id .. " exited with status " .. r.status .. ": "
                  .. string.sub(r.stderr, 1, 300))
          end
        else
          task:log("warn", "release_command skipped: node " .. tostring(task.json.node_id)
                   .. " never got as far as reporting how to reach " .. id)
        end
      end
      task:log("info", "released " .. id .. " back to the pool (the machine keeps running)")
    end,
  },
}
