/* A plugin whose entry point starts a daemon, a child that lives on after the
 * probe that loads it: forked without exec, it holds every descriptor the
 * probe has, its verdict pipe included. It lives until the process that
 * started the probe is gone, at most four minutes. Built into
 * <build>/plugins/probe_forks/, a directory of its own. See probe_test.
 *
 * With WEFT_TEST_FORK_PIDFILE=FILE in its environment it writes the daemon's
 * pid there (the test kills it); with WEFT_TEST_FORK_CRASH=1 the entry point
 * crashes (SIGSEGV) once the daemon runs, so the probe writes no verdict. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/plugin.h"

static int probe_forks_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action,
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
                                                  "probe-forks",
                                                  "1.0",
                                                  "fixture: starts a daemon while it loads",
                                                  WEFT_ACTION_INSTALL,
                                                  0u,
                                                  sizeof(weft_field),
                                                  0u,
                                                  NULL,
                                                  NULL,
                                                  NULL,
                                                  probe_forks_run,
                                                  NULL};

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor *weft_plugin_entry(uint32_t major, uint32_t minor, char *err,
                                                                   size_t err_len) {
  (void)major;
  (void)minor;
  const pid_t starter = getppid();
  const pid_t child = fork();
  if (child < 0) {
    snprintf(err, err_len, "fork failed");
    return NULL;
  }
  if (child == 0) {
    /* Only async-signal-safe calls in the child of a possibly threaded process. */
    setsid();
    for (int i = 0; i < 4800 && kill(starter, 0) == 0; ++i) sleep_ms(50);
    _exit(0);
  }
  const char *pidfile = getenv("WEFT_TEST_FORK_PIDFILE");
  if (pidfile) {
    FILE *f = fopen(pidfile, "w");
    if (f) {
      fprintf(f, "%ld\n", (long)child);
      fclose(f);
    }
  }
  const char *crash = getenv("WEFT_TEST_FORK_CRASH");
  if (crash && strcmp(crash, "1") == 0) raise(SIGSEGV);
  return &descriptor;
}
