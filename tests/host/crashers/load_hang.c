/* A plugin that hangs while loading (in weft_plugin_entry), built into
 * <build>/plugins/load_hang/, a directory of its own so that hosts pointed at
 * the crashers do not wait for it.
 *
 * With WEFT_TEST_LOAD_RENDEZVOUS=DIR:N in its environment it does not hang for
 * good: it leaves a file in DIR and waits until DIR holds N files, then loads.
 * N copies load only when N probes run at once (probe_test). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/plugin.h"

static int load_hang_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action, char *err,
                         size_t err_len) {
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
                                                  "load-hang",
                                                  "1.0",
                                                  "fixture: hangs while loading",
                                                  WEFT_ACTION_INSTALL,
                                                  0u,
                                                  sizeof(weft_field),
                                                  0u,
                                                  NULL,
                                                  NULL,
                                                  NULL,
                                                  load_hang_run,
                                                  NULL};

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e = readdir(d); e; e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor *weft_plugin_entry(uint32_t major, uint32_t minor, char *err,
                                                                   size_t err_len) {
  (void)major;
  (void)minor;
  (void)err;
  (void)err_len;
  const char *rendezvous = getenv("WEFT_TEST_LOAD_RENDEZVOUS");
  const char *colon = rendezvous ? strrchr(rendezvous, ':') : NULL;
  if (!colon) {
    for (;;) sleep_ms(1000);
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", (int)(colon - rendezvous), rendezvous);
  const int want = atoi(colon + 1);
  char mine[4200];
  snprintf(mine, sizeof mine, "%s/%ld", dir, (long)getpid());
  FILE *f = fopen(mine, "w");
  if (f) fclose(f);
  while (count_files(dir) < want) sleep_ms(10);
  return &descriptor;
}
