/* A plugin that prints while it loads (in weft_plugin_entry), to stdout and
 * stderr, far more to stderr than a host logs of one probe; built into
 * <build>/plugins/probe_chatty/, a directory of its own. Loads and runs like a
 * good plugin. See tests/integration/host_isolation_test.cpp. */
#include <stdint.h>
#include <stdio.h>

#include "weft/plugin.h"

static int probe_chatty_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action,
                            char *err, size_t err_len) {
  (void)instance;
  (void)host;
  (void)task;
  (void)action;
  (void)err;
  (void)err_len;
  return WEFT_OK;
}

static const weft_plugin_descriptor descriptor = {sizeof(weft_plugin_descriptor),
                                                  WEFT_ABI_MAJOR,
                                                  WEFT_ABI_MINOR,
                                                  WEFT_KIND_AUTOMATOR,
                                                  "probe-chatty",
                                                  "1.0",
                                                  "fixture: prints to stdout and stderr while it loads",
                                                  WEFT_ACTION_INSTALL,
                                                  0u,
                                                  sizeof(weft_field),
                                                  0u,
                                                  NULL,
                                                  NULL,
                                                  NULL,
                                                  probe_chatty_run,
                                                  NULL};

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor *weft_plugin_entry(uint32_t major, uint32_t minor, char *err,
                                                                   size_t err_len) {
  (void)major;
  (void)minor;
  (void)err;
  (void)err_len;
  printf("probe-chatty: hello on stdout from the entry point\n");
  /* About 150 KB: more than a host logs of one probe's stderr. */
  for (int i = 0; i < 2000; ++i)
    fprintf(stderr, "probe-chatty stderr line %d: the quick brown fox jumps over the lazy dog\n", i);
  printf("probe-chatty: the last words on stdout, unfinished");
  return &descriptor;
}
