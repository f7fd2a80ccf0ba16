/* hello-automator: a complete automator plugin in plain C. Every service action
 * logs what it would do on the task's node, reports progress and returns a
 * result. Only weft_plugin_entry is exported (-fvisibility=hidden, from
 * weft-plugin.pc). See docs/plugin-abi.md. */
#include <stdio.h>
#include <string.h>

#include "weft/plugin.h"

static const char *action_name(uint32_t action) {
  const char *name = weft_action_name(action);
  return name ? name : "?";
}

/* Copies the string value of the first "key":"value" pair in the task JSON into
 * out. Enough for the flat keys read here; a real plugin uses a JSON parser. */
static void find_string(const char *json, const char *key, char *out, size_t out_len) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
  const char *start = strstr(json, pattern);
  size_t n = 0;
  if (start) {
    start += strlen(pattern);
    while (start[n] && start[n] != '"' && n + 1 < out_len) ++n;
    memcpy(out, start, n);
  }
  out[n] = '\0';
}

static int hello_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action, char *err,
                     size_t err_len) {
  (void)instance;
  char node[256], line[512], result[300];
  find_string(host->task_json(task), "node_id", node, sizeof node);
  if (host->cancelled(task)) {
    snprintf(err, err_len, "cancelled before %s", action_name(action));
    return WEFT_ERR_CANCELLED;
  }
  snprintf(line, sizeof line, "hello-automator %s on node %s", action_name(action), node[0] ? node : "?");
  host->log(task, WEFT_LOG_INFO, line);
  host->progress(task, 50, "halfway");
  snprintf(result, sizeof result, "\"hello from %s\"", action_name(action));
  if (host->set_result(task, "greeting", result, err, err_len) != WEFT_OK) return WEFT_ERR_INTERNAL;
  host->progress(task, 100, "done");
  return WEFT_OK;
}

static const weft_field hello_fields[] = {
    {"greeting", "Greeting", WEFT_FIELD_STRING, 0, "\"hello\"", "what the plugin says (unused)"},
};

static const weft_plugin_descriptor hello_descriptor = {
    .struct_size = sizeof(weft_plugin_descriptor),
    .abi_major = WEFT_ABI_MAJOR,
    .abi_minor = WEFT_ABI_MINOR,
    .kind = WEFT_KIND_AUTOMATOR,
    .type_name = "hello-automator",
    .version = "1.0",
    .description = "Example: says hello for every service action",
    .actions = WEFT_ACTION_BOOTSTRAP | WEFT_ACTION_INSTALL | WEFT_ACTION_CONFIGURE | WEFT_ACTION_INITIALIZE |
               WEFT_ACTION_START | WEFT_ACTION_STOP | WEFT_ACTION_REMOVE,
    .field_count = sizeof hello_fields / sizeof hello_fields[0],
    .field_size = sizeof(weft_field),
    .resource_type_count = 0,
    .fields = hello_fields,
    .resource_types = NULL,
    .init = NULL,
    .run = hello_run,
    .destroy = NULL,
};

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor *weft_plugin_entry(uint32_t host_major, uint32_t host_minor,
                                                                   char *err, size_t err_len) {
  /* A host of another major, or one older than the minor built for, lacks what
   * this descriptor declares. */
  if (host_major != WEFT_ABI_MAJOR || host_minor < WEFT_ABI_MINOR) {
    snprintf(err, err_len, "hello-automator needs Weft plugin ABI %u.%u or a later %u.x", WEFT_ABI_MAJOR,
             WEFT_ABI_MINOR, WEFT_ABI_MAJOR);
    return NULL;
  }
  return &hello_descriptor;
}
