/* Compiled as strict C11 (-Wall -Wextra -Werror -pedantic): proves plugin.h is a C
 * header, and reports the C compiler's view of every ABI struct so the C++ side
 * (abi_layout_test.cpp) can check both compilers agree. Uses every type. */
#include <stddef.h>
#include <stdint.h>

#include "weft/plugin.h"

#include "abi_c.h"

static int c_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action, char *err,
                 size_t err_len) {
  weft_log_level level = WEFT_LOG_INFO;
  (void)instance;
  (void)action;
  host->log(task, (int)level, "from C");
  host->progress(task, 10, NULL);
  if (host->cancelled(task)) return WEFT_ERR_CANCELLED;
  if (!WEFT_HOST_HAS(host, cancelled)) return WEFT_ERR_INTERNAL;
  (void)host->task_json(task);
  return host->set_result(task, "lang", "\"c\"", err, err_len);
}

static const weft_field c_fields[] = {
    {"n", "N", (uint32_t)WEFT_FIELD_INTEGER, WEFT_FIELD_REQUIRED, "1", NULL},
    {"s", "S", (uint32_t)WEFT_FIELD_STRING, WEFT_FIELD_SENSITIVE, NULL, "a secret"},
};
static const char *const c_resources[] = {"scripts"};

static const weft_plugin_descriptor c_descriptor = {
    sizeof(weft_plugin_descriptor), WEFT_ABI_MAJOR, WEFT_ABI_MINOR, (uint32_t)WEFT_KIND_PROVIDER, "c-plugin", "1.0",
    NULL, (uint32_t)WEFT_ACTION_CREATE | (uint32_t)WEFT_ACTION_DELETE, 2u, sizeof(weft_field), 1u, c_fields,
    c_resources, NULL, c_run, NULL};

static const weft_plugin_descriptor *c_entry(uint32_t major, uint32_t minor, char *err, size_t err_len) {
  (void)minor;
  if (major != WEFT_ABI_MAJOR) {
    if (err_len > 0) err[0] = '\0';
    return NULL;
  }
  return &c_descriptor;
}

weft_plugin_entry_fn weft_c_entry(void) { return &c_entry; }

int weft_c_field_type_json(void) {
  weft_field_type t = WEFT_FIELD_JSON;
  weft_plugin_kind k = WEFT_KIND_AUTOMATOR;
  weft_action a = WEFT_ACTION_REMOVE;
  return (int)t + (int)k * 0 + (int)a * 0;
}

const char *weft_c_action_name(uint32_t action) { return weft_action_name(action); }

#define ROW(s, m) {#s "." #m, offsetof(s, m), sizeof(((s *)0)->m)}

static const weft_c_layout c_layout[] = {
    {"weft_field", 0, sizeof(weft_field)},
    ROW(weft_field, name),
    ROW(weft_field, label),
    ROW(weft_field, type),
    ROW(weft_field, flags),
    ROW(weft_field, default_json),
    ROW(weft_field, description),
    {"weft_host_services", 0, sizeof(weft_host_services)},
    {"weft_host_services up to 1.1", 0, offsetof(weft_host_services, field_json)},
    ROW(weft_host_services, struct_size),
    ROW(weft_host_services, abi_major),
    ROW(weft_host_services, abi_minor),
    ROW(weft_host_services, log),
    ROW(weft_host_services, progress),
    ROW(weft_host_services, set_result),
    ROW(weft_host_services, task_json),
    ROW(weft_host_services, cancelled),
    ROW(weft_host_services, ssh_exec),
    ROW(weft_host_services, ssh_upload),
    ROW(weft_host_services, ssh_write),
    ROW(weft_host_services, field_json),
    ROW(weft_host_services, node_json),
    {"weft_plugin_descriptor", 0, sizeof(weft_plugin_descriptor)},
    ROW(weft_plugin_descriptor, struct_size),
    ROW(weft_plugin_descriptor, abi_major),
    ROW(weft_plugin_descriptor, abi_minor),
    ROW(weft_plugin_descriptor, kind),
    ROW(weft_plugin_descriptor, type_name),
    ROW(weft_plugin_descriptor, version),
    ROW(weft_plugin_descriptor, description),
    ROW(weft_plugin_descriptor, actions),
    ROW(weft_plugin_descriptor, field_count),
    ROW(weft_plugin_descriptor, field_size),
    ROW(weft_plugin_descriptor, resource_type_count),
    ROW(weft_plugin_descriptor, fields),
    ROW(weft_plugin_descriptor, resource_types),
    ROW(weft_plugin_descriptor, init),
    ROW(weft_plugin_descriptor, run),
    ROW(weft_plugin_descriptor, destroy),
    {"enum weft_plugin_kind", 0, sizeof(weft_plugin_kind)},
    {"enum weft_action", 0, sizeof(weft_action)},
    {"enum weft_field_type", 0, sizeof(weft_field_type)},
    {"enum weft_log_level", 0, sizeof(weft_log_level)},
};

const weft_c_layout *weft_c_layout_rows(size_t *count) {
  *count = sizeof c_layout / sizeof c_layout[0];
  return c_layout;
}
