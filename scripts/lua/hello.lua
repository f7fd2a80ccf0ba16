-- hello.lua: an example Lua automator (docs/lua-plugins.md).
--
-- It greets the node it runs on: every action logs what it does, reports
-- progress and leaves a result that later tasks on the same node can read.
-- It runs nothing on the node, so it needs no SSH access and runs as is under
-- `weft-host run`; to run a command there, call
-- task:exec("echo ...", { timeout_ms = 10000 }), as shell.lua does
-- (docs/lua-plugins.md, "SSH to the node").
--
-- It declares no `bootstrap`: BOOTSTRAP is optional. A node gets a BOOTSTRAP
-- task only when one of its services' automators declares it; a node whose
-- automators are all like this one gets none.

-- The node's name as the task names it.
local function node_name(task)
  return task.json.hostname or task.json.node_id or "an unnamed node"
end

-- One function serves every action; the table below binds it per action.
local function greet(action)
  return function(task)
    local who = node_name(task)
    task:log("info", action .. ": " .. task.fields.greeting .. " from " .. who)
    task:progress(10, "starting " .. action)
    local line = task.fields.greeting .. ", " .. who
    if task.fields.shout then line = string.upper(line) .. "!" end
    task:progress(90, "greeted")
    task:set_result("greeting", line)
    task:set_result("greeted_at", os.time())
  end
end

return {
  type = "hello-lua",
  kind = "automator",
  version = "1.0",
  description = "Greets each node: logs, progress and a result per action",
  fields = {
    greeting = { label = "Greeting", type = "string", default = "hello",
                 description = "What to say to the node" },
    shout = { label = "Shout", type = "boolean", default = false },
  },
  resource_types = { "scripts" },
  actions = {
    install = greet("INSTALL"),
    configure = greet("CONFIGURE"),
    start = greet("START"),
    stop = greet("STOP"),
    remove = function(task)
      task:log("info", "REMOVE: goodbye, " .. node_name(task))
      task:set_result("greeting", weft.null)
    end,
  },
}
