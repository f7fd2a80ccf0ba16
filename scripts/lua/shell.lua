-- shell.lua: an example Lua automator (docs/lua-plugins.md) that runs a
-- command, or a script resource, on the node over SSH.
--
-- It does what the native `shell` automator does, in Lua: a private work
-- directory on the node with the cluster config as config.json, node and
-- cluster facts in the environment, every output line in the task's log, and
-- the exit status deciding success. It adds one thing: a line the command
-- prints as `WEFT_RESULT name=value` sets the result field `name` (a string),
-- which later tasks on the node see in task.json.results.
--
--   "install": {"type": "shell-lua", "fields": {"command": "apt-get install -y nginx"}}
--   "start":   {"type": "shell-lua", "fields": {"script": "start-web.sh",
--                                              "args": ["%ip.bind_v4.self%"]}}

local TAIL_LINES = 20

-- One shell word, whatever it holds.
local function quote(s)
  return "'" .. string.gsub(tostring(s), "'", "'\\''") .. "'"
end

-- A fact about the node: from the task, else from its earlier results.
local function fact(task, key)
  local j = task.json
  for _, where in ipairs({ j, j.results, j.node }) do
    if type(where) == "table" and where[key] ~= nil and where[key] ~= "" then return where[key] end
  end
  return nil
end

-- The task's resource named `name` (a file the host fetched and verified).
local function resource(task, name)
  for _, r in ipairs(task.json.resources or {}) do
    if type(r) == "table" and r.name == name and r.path then return r end
  end
  error("field 'script' names '" .. name .. "', which is not a resource of this task; upload it with "
        .. "`weft resource upload scripts " .. name .. "`, then stage and sync it")
end

-- Splits streamed chunks into lines: each is logged, the last few are kept
-- for the error message, and WEFT_RESULT lines become result fields.
local function line_sink(task, level, results)
  local sink = { partial = "", tail = {} }
  local function line(text)
    task:log(level, text)
    local name, value = string.match(text, "^WEFT_RESULT ([%w_%.%-]+)=(.*)$")
    if name and results then results[name] = value end
    table.insert(sink.tail, text)
    if #sink.tail > TAIL_LINES then table.remove(sink.tail, 1) end
  end
  function sink.add(chunk)
    local text = sink.partial .. chunk
    local start = 1
    while true do
      local nl = string.find(text, "\n", start, true)
      if not nl then break end
      line(string.sub(text, start, nl - 1))
      start = nl + 1
    end
    sink.partial = string.sub(text, start)
    if #sink.partial > 4096 then  -- a line that never ends is logged in pieces
      line(sink.partial)
      sink.partial = ""
    end
  end
  function sink.flush()
    if sink.partial ~= "" then line(sink.partial) end
    sink.partial = ""
  end
  return sink
end

local function checked(task, command, what)
  local r = task:exec(command, { timeout_ms = 30000 })
  if not r.ok then
    error(what .. " failed on node " .. tostring(fact(task, "hostname")) .. " (status " .. r.status .. "): "
          .. string.sub(r.stderr, 1, 300))
  end
  return r
end

local function run(task)
  local f = task.fields
  local action = task.action
  local node = fact(task, "hostname") or fact(task, "node_id") or "(unnamed)"
  if (f.command == nil) == (f.script == nil) then
    error("give exactly one of the fields 'command' (a command line) and 'script' (a scripts resource)")
  end
  if type(f.args) ~= "table" then error("field 'args' must be a list of strings, such as [\"-v\"]") end
  if type(f.env) ~= "table" then error("field 'env' must be an object of NAME: value, such as {\"PORT\": \"80\"}") end

  -- 1. A private work directory, with the config and the script in it.
  local dir = string.format("/tmp/weft-lua-%s-%08x%08x", tostring(task.json.task_id or 0),
                            math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
  task:progress(5, "preparing " .. dir)
  checked(task, "umask 077 && mkdir -p " .. quote(dir), "creating the work directory")
  task:write(weft.json_encode(task.json.config or {}) .. "\n", dir .. "/config.json", "0600")
  local words = {}
  for i, a in ipairs(f.args) do words[i] = quote(a) end
  local body
  if f.script then
    task:upload(resource(task, f.script).path, dir .. "/script", "0700")
    body = quote(dir .. "/script") .. " " .. table.concat(words, " ")
  else
    body = "set -- " .. table.concat(words, " ") .. "\n" .. f.command
  end

  -- 2. The facts, exported; the directory goes when the command ends.
  local hosts = {}
  for _, n in ipairs(task.json.nodes or {}) do
    if type(n) == "table" and n.hostname then table.insert(hosts, n.hostname) end
  end
  local env = {
    WEFT_ACTION = action,
    WEFT_TASK_ID = tostring(task.json.task_id or ""),
    WEFT_CLUSTER_ID = tostring(task.json.cluster_id or ""),
    WEFT_NODE_ID = tostring(task.json.node_id or ""),
    WEFT_HOSTNAME = tostring(fact(task, "hostname") or ""),
    WEFT_ACCESS_V4 = tostring(fact(task, "access_v4") or ""),
    WEFT_BIND_V4 = tostring(fact(task, "bind_v4") or fact(task, "access_v4") or ""),
    WEFT_SERVICE = type(task.json.service) == "table" and tostring(task.json.service.name or "") or "",
    WEFT_CLUSTER_HOSTS = table.concat(hosts, " "),
    WEFT_CONFIG_FILE = dir .. "/config.json",
    WEFT_WORK_DIR = dir,
  }
  for name, value in pairs(f.env) do
    if type(name) ~= "string" or not string.match(name, "^[%a_][%w_]*$") then
      error("field 'env' has the name '" .. tostring(name) .. "', which is not an environment variable name")
    end
    env[name] = tostring(value)
  end
  local names = {}
  for name in pairs(env) do table.insert(names, name) end
  table.sort(names)  -- the same script text every time
  local script = {}
  for _, name in ipairs(names) do table.insert(script, "export " .. name .. "=" .. quote(env[name])) end
  table.insert(script, "trap 'rm -rf " .. quote(dir) .. "' EXIT")
  table.insert(script, "cd " .. quote(dir) .. " || exit 1")
  table.insert(script, body)

  -- 3. Run it; its output streams into the task's log as it comes.
  task:progress(20, action .. " running on " .. node)
  local results = {}
  local out = line_sink(task, "info", results)
  local err = line_sink(task, "warn", nil)
  local r = task:exec(table.concat(script, "\n") .. "\n", {
    timeout_ms = f.timeout_ms,
    on_stdout = out.add,
    on_stderr = err.add,
    max_output_bytes = 0,  -- the sinks keep what matters
  })
  out.flush()
  err.flush()
  task:set_result("exit_status", r.status)
  for name, value in pairs(results) do task:set_result(name, value) end
  if not r.ok then
    local tail = #err.tail > 0 and err.tail or out.tail
    error(action .. " on node " .. node .. " exited with status " .. r.status
          .. (#tail > 0 and ("; last output:\n  " .. table.concat(tail, "\n  ")) or " and no output"))
  end
  task:progress(100, action .. " done")
end

return {
  type = "shell-lua",
  kind = "automator",
  version = "1.0",
  description = "Runs a command or a script resource on the node over SSH; the exit status decides success",
  fields = {
    command = { label = "Command", type = "string",
                description = "a shell command line run on the node; sees args as \"$@\" (give command or script)" },
    script = { label = "Script", type = "string",
               description = "name of a scripts resource of the task, uploaded and run with args" },
    args = { label = "Arguments", type = "json", default = weft.array({}),
             description = "list of strings passed to the command or script" },
    env = { label = "Environment", type = "json", default = {},
            description = "extra environment variables, as an object of NAME: value" },
    timeout_ms = { label = "Timeout (ms)", type = "integer", default = 600000,
                   description = "how long the command may run before it is stopped and the task fails" },
  },
  resource_types = { "scripts" },
  actions = {
    bootstrap = run, install = run, configure = run, initialize = run,
    start = run, stop = run, remove = run,
  },
}
