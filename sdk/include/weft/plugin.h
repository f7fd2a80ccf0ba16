/*
 * weft/plugin.h: the Weft native plugin ABI, version 1.2.
 *
 * This header is the whole contract between weft-host and a native plugin.
 * It is plain C so that any language with a C FFI can implement a plugin; the
 * C++ convenience layer is in weft/plugin.hpp. If it is not in this file (or
 * plugin.hpp), it is not API. Versioning rules: docs/plugin-abi.md.
 *
 * In short:
 *  - A plugin exports exactly one symbol, weft_plugin_entry, which returns a
 *    pointer to a static weft_plugin_descriptor.
 *  - Every table begins with its own size (struct_size). Tables only grow at
 *    the end; a minor version adds members, a major version breaks the ABI.
 *  - No C++ types, exceptions or heap ownership cross this boundary. Strings
 *    are NUL-terminated UTF-8. Errors are an int code plus a message the
 *    callee writes into a buffer the caller owns.
 *  - The host never unloads a plugin while the process runs.
 */
#ifndef WEFT_PLUGIN_H_
#define WEFT_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_ABI_MAJOR 1u
#define WEFT_ABI_MINOR 2u

/* The one symbol a plugin exports. */
#define WEFT_PLUGIN_ENTRY_SYMBOL "weft_plugin_entry"

#if defined(__GNUC__) || defined(__clang__)
#define WEFT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_PLUGIN_EXPORT
#endif

/* Return codes of plugin callbacks and host services. */
enum {
  WEFT_OK = 0,
  WEFT_ERR_FAILED = 1,      /* the action ran and failed; the message says why */
  WEFT_ERR_INVALID = 2,     /* the task or its fields are not acceptable (not retried) */
  WEFT_ERR_UNSUPPORTED = 3, /* the plugin does not implement this action (not retried) */
  WEFT_ERR_CANCELLED = 4,   /* stopped because the host asked (see cancelled) */
  WEFT_ERR_TIMEOUT = 5,     /* a deadline inside the plugin passed */
  WEFT_ERR_INTERNAL = 6     /* a bug or an unexpected failure */
};

typedef enum weft_plugin_kind {
  WEFT_KIND_PROVIDER = 1,  /* creates, confirms and deletes nodes */
  WEFT_KIND_AUTOMATOR = 2  /* installs, configures and runs services on nodes */
} weft_plugin_kind;

/* Task actions. Each is a single bit so a descriptor can list what it implements. */
typedef enum weft_action {
  WEFT_ACTION_CREATE = 1u << 0,
  WEFT_ACTION_CONFIRM = 1u << 1,
  WEFT_ACTION_BOOTSTRAP = 1u << 2,
  WEFT_ACTION_INSTALL = 1u << 3,
  WEFT_ACTION_CONFIGURE = 1u << 4,
  WEFT_ACTION_INITIALIZE = 1u << 5,
  WEFT_ACTION_START = 1u << 6,
  WEFT_ACTION_STOP = 1u << 7,
  WEFT_ACTION_REMOVE = 1u << 8,
  WEFT_ACTION_DELETE = 1u << 9
} weft_action;

/* Every weft_action bit. */
#define WEFT_ACTION_ALL 0x3FFu

/* The name tasks, the server and messages give an action ("CREATE"), or NULL
 * if `action` is not exactly one weft_action bit. Inline, so it adds no symbol
 * to the ABI and a plugin still links nothing of the host's. */
static inline const char *weft_action_name(uint32_t action) {
  switch (action) {
    case WEFT_ACTION_CREATE: return "CREATE";
    case WEFT_ACTION_CONFIRM: return "CONFIRM";
    case WEFT_ACTION_BOOTSTRAP: return "BOOTSTRAP";
    case WEFT_ACTION_INSTALL: return "INSTALL";
    case WEFT_ACTION_CONFIGURE: return "CONFIGURE";
    case WEFT_ACTION_INITIALIZE: return "INITIALIZE";
    case WEFT_ACTION_START: return "START";
    case WEFT_ACTION_STOP: return "STOP";
    case WEFT_ACTION_REMOVE: return "REMOVE";
    case WEFT_ACTION_DELETE: return "DELETE";
    default: return NULL;
  }
}

typedef enum weft_field_type {
  WEFT_FIELD_STRING = 1,
  WEFT_FIELD_INTEGER = 2,
  WEFT_FIELD_NUMBER = 3,
  WEFT_FIELD_BOOLEAN = 4,
  WEFT_FIELD_JSON = 5 /* any JSON value: object, array, ... */
} weft_field_type;

/* weft_field.flags */
#define WEFT_FIELD_REQUIRED 0x1u
#define WEFT_FIELD_SENSITIVE 0x2u /* a secret: never logged, shown or exported */

typedef enum weft_log_level {
  WEFT_LOG_DEBUG = 1,
  WEFT_LOG_INFO = 2,
  WEFT_LOG_WARN = 3,
  WEFT_LOG_ERROR = 4
} weft_log_level;

/* One field a plugin accepts in its provider's or action's "fields" object.
 * The descriptor gives the element size (field_size) so this struct may grow. */
typedef struct weft_field {
  const char *name;         /* key in "fields", e.g. "latency_ms" */
  const char *label;        /* short human label */
  uint32_t type;            /* weft_field_type */
  uint32_t flags;           /* WEFT_FIELD_REQUIRED | WEFT_FIELD_SENSITIVE */
  const char *default_json; /* default as JSON text ("0", "\"x\""), or NULL */
  const char *description;  /* may be NULL */
} weft_field;

/* One task being run. Opaque; valid only during the run callback. */
typedef struct weft_task weft_task;

/* Receives a command's output as it arrives: chunks (not lines), not
 * NUL-terminated, valid only during the call. */
typedef void (*weft_output_fn)(void *user_data, const char *data, size_t len);

/* Services the host offers to plugins. Append-only: a plugin built for a newer
 * minor version must check struct_size before calling a member this version
 * lacks (WEFT_HOST_HAS(services, member)). */
typedef struct weft_host_services {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  /* --- 1.0 --- */
  /* Logs a line for the task (task may be NULL outside a task). */
  void (*log)(weft_task *task, int level, const char *message);
  /* Reports progress, 0..100, with a short note (may be NULL). */
  void (*progress)(weft_task *task, int percent, const char *message);
  /* Sets one field of the task's result; value is JSON text. Fields flow into
   * later tasks on the same node. Returns WEFT_OK or WEFT_ERR_INVALID. */
  int (*set_result)(weft_task *task, const char *key, const char *json_value, char *err, size_t err_len);
  /* The task as JSON text (docs/protocol.md, "The task a plugin sees").
   * Owned by the host; valid until run returns. */
  const char *(*task_json)(weft_task *task);
  /* Nonzero once the host wants the task to stop (timeout, abort, shutdown).
   * Long-running plugins should poll it and return WEFT_ERR_CANCELLED. */
  int (*cancelled)(weft_task *task);
  /* --- 1.1: SSH to the task's node (docs/ssh.md) ---
   * The host finds the node in the task: its address (access_v4), SSH port
   * (ssh_port, default 22), user and private key (ssh_auth) and host keys
   * (host_keys), as the provider's CREATE and CONFIRM returned them. The
   * server's host key must be one of host_keys or the call fails. Connections
   * are reused per node within a worker. timeout_ms 0 means the host's default.
   * Errors: WEFT_ERR_TIMEOUT, WEFT_ERR_CANCELLED (the task was asked to stop),
   * WEFT_ERR_INVALID (the task does not say how to reach its node),
   * WEFT_ERR_FAILED (connection, host key mismatch, authentication, transfer). */
  /* Runs `command` (a shell command line) on the node. Output goes to
   * on_stdout / on_stderr (either may be NULL) with user_data, from the calling
   * thread, while the command runs. Returns WEFT_OK once the command ran, its
   * exit status in *exit_status (128+N if signal N killed it): a nonzero exit is
   * the command's failure, not the call's. */
  int (*ssh_exec)(weft_task *task, const char *command, uint32_t timeout_ms, weft_output_fn on_stdout,
                  weft_output_fn on_stderr, void *user_data, int *exit_status, char *err, size_t err_len);
  /* Copies the local file local_path to remote_path on the node, with `mode`
   * (e.g. 0644). The remote directory must exist. */
  int (*ssh_upload)(weft_task *task, const char *local_path, const char *remote_path, uint32_t mode,
                    uint32_t timeout_ms, char *err, size_t err_len);
  /* Writes len bytes at data to remote_path on the node, with `mode`. */
  int (*ssh_write)(weft_task *task, const void *data, size_t len, const char *remote_path, uint32_t mode,
                   uint32_t timeout_ms, char *err, size_t err_len);
  /* --- 1.2: the task's fields and node, found by the host ---
   * Both return JSON text owned by the host, valid until run returns, or NULL
   * when the task does not have the value (a null counts as absent). */
  /* The plugin's field `name` as the task carries it (sealed values already
   * opened): the provider's fields for a provider, the service action's fields
   * for an automator; a task enqueued by hand has them in its own "fields". */
  const char *(*field_json)(weft_task *task, const char *name);
  /* A fact about the task's node: hostname, access_v4, ssh_port, ssh_auth,
   * host_keys, provider_id, ... Found where the SSH services find it: the task
   * itself, then what the node's earlier tasks returned (results), then the
   * node's own record (node, node.results). */
  const char *(*node_json)(weft_task *task, const char *key);
} weft_host_services;

#define WEFT_HOST_HAS(services, member)                                                     \
  ((services)->struct_size >= offsetof(weft_host_services, member) + sizeof((services)->member))

/* What a plugin is and how to call it. Returned by weft_plugin_entry; must stay
 * valid (static storage) for as long as the library is loaded. */
typedef struct weft_plugin_descriptor {
  uint32_t struct_size; /* sizeof(weft_plugin_descriptor) as the plugin was built */
  uint32_t abi_major;   /* WEFT_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;   /* WEFT_ABI_MINOR the plugin was built with */
  uint32_t kind;        /* weft_plugin_kind */
  const char *type_name;   /* unique per host: [a-z0-9][a-z0-9_.-]*, at most 64 bytes */
  const char *version;     /* the plugin's own version, free text; may be NULL */
  const char *description; /* may be NULL */
  uint32_t actions;        /* bit set of weft_action implemented */
  uint32_t field_count;
  uint32_t field_size;     /* sizeof(weft_field) as the plugin was built */
  uint32_t resource_type_count;
  const weft_field *fields;
  const char *const *resource_types; /* resource types the plugin uses, e.g. "scripts" */

  /* Optional: makes a plugin instance. On failure returns nonzero and writes a
   * message into err. A NULL init means the instance pointer is NULL. */
  int (*init)(const weft_host_services *host, void **instance, char *err, size_t err_len);
  /* Required: runs one action (a single weft_action bit) of one task. May be
   * called from several threads at once, each with its own task. */
  int (*run)(void *instance, const weft_host_services *host, weft_task *task, uint32_t action, char *err,
             size_t err_len);
  /* Optional: frees the instance. Called at most once, after every run returned. */
  void (*destroy)(void *instance);
} weft_plugin_descriptor;

/* The entry point's type. The host passes its own ABI version; the plugin
 * returns its descriptor, or NULL with a message in err if it cannot work with
 * that host. */
typedef const weft_plugin_descriptor *(*weft_plugin_entry_fn)(uint32_t host_abi_major, uint32_t host_abi_minor,
                                                               char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PLUGIN_H_ */
