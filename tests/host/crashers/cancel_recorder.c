/* A plugin that runs until the host cancels its task, then appends
 * "task <task_id> attempt <attempt>: the plugin saw the cancel" to the file the
 * task names at its top level ("cancel_file") and returns WEFT_ERR_CANCELLED.
 * Built into <build>/plugins/cancel_recorder/, a directory of its own. See
 * tests/integration/host_integration_test.cpp (a stop's grace). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/plugin.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The integer after "key": in the task's JSON (compact, as the host writes it); 0 if none. */
static long long json_int(const char *json, const char *key) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *at = strstr(json, pattern);
  return at ? strtoll(at + strlen(pattern), NULL, 10) : 0;
}

static int cancel_recorder_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action,
                               char *err, size_t err_len) {
  (void)instance;
  (void)action;
  const char *json = host->task_json(task);
  while (!host->cancelled(task)) sleep_ms(10);
  char path[4096] = "";
  const char *at = strstr(json, "\"cancel_file\":\"");
  if (at) {
    at += strlen("\"cancel_file\":\"");
    const char *end = strchr(at, '"');
    if (end && (size_t)(end - at) < sizeof path) snprintf(path, sizeof path, "%.*s", (int)(end - at), at);
  }
  if (path[0]) {
    char line[128];
    const int n = snprintf(line, sizeof line, "task %lld attempt %lld: the plugin saw the cancel\n",
                           json_int(json, "task_id"), json_int(json, "attempt"));
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (write(fd, line, (size_t)n) != n) { /* the test sees the line missing */
      }
      close(fd);
    }
  }
  snprintf(err, err_len, "cancel-recorder: cancelled by the host");
  return WEFT_ERR_CANCELLED;
}

static const weft_plugin_descriptor descriptor = {sizeof(weft_plugin_descriptor),
                                                  WEFT_ABI_MAJOR,
                                                  WEFT_ABI_MINOR,
                                                  WEFT_KIND_AUTOMATOR,
                                                  "cancel-recorder",
                                                  "1.0",
                                                  "fixture: runs until cancelled and records that it saw the cancel",
                                                  WEFT_ACTION_INSTALL,
                                                  0u,
                                                  sizeof(weft_field),
                                                  0u,
                                                  NULL,
                                                  NULL,
                                                  NULL,
                                                  cancel_recorder_run,
                                                  NULL};

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor *weft_plugin_entry(uint32_t major, uint32_t minor, char *err,
                                                                   size_t err_len) {
  (void)major;
  (void)minor;
  (void)err;
  (void)err_len;
  return &descriptor;
}
