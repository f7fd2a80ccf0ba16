/* Crash-isolation fixtures: real plugins that take their worker process down
 * in one way each, in whatever action the task names. Built once per mode
 * (CRASHER_MODE) into <build>/plugins/crashers/, a directory no host loads by
 * default. See tests/integration/host_isolation_test.cpp. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/plugin.h"

#define MODE_SEGV 1
#define MODE_ABORT 2
#define MODE_EXIT 3
#define MODE_HANG 4
#define MODE_MEMORY 5
#define MODE_LOAD 6
#define MODE_NOISY 7
#define MODE_FLOOD_ABORT 8
#define MODE_DAEMON_ABORT 9

#if CRASHER_MODE == MODE_SEGV
#define CRASHER_TYPE "crash-segv"
#elif CRASHER_MODE == MODE_ABORT
#define CRASHER_TYPE "crash-abort"
#elif CRASHER_MODE == MODE_EXIT
#define CRASHER_TYPE "crash-exit"
#elif CRASHER_MODE == MODE_HANG
#define CRASHER_TYPE "crash-hang"
#elif CRASHER_MODE == MODE_MEMORY
#define CRASHER_TYPE "crash-memory"
#elif CRASHER_MODE == MODE_LOAD
#define CRASHER_TYPE "crash-on-load"
#elif CRASHER_MODE == MODE_NOISY
/* Does not crash: prints 40,000 lines to stdout and as many to stderr, and succeeds. */
#define CRASHER_TYPE "noisy-output"
#elif CRASHER_MODE == MODE_FLOOD_ABORT
/* Prints about 300 KB to stderr, far more than weft-host logs of one task,
 * then its crash report (one line), and aborts. */
#define CRASHER_TYPE "flood-then-abort"
#elif CRASHER_MODE == MODE_DAEMON_ABORT
/* Starts a child that keeps the worker's stdout and stderr open (as a daemon
 * a plugin starts would) until the host's master is gone, then writes an
 * unfinished line to stderr and aborts: the master never reads the end of
 * those pipes while the child lives. */
#define CRASHER_TYPE "daemon-then-abort"
#else
#error "CRASHER_MODE must be one of MODE_*"
#endif

#if CRASHER_MODE == MODE_HANG || CRASHER_MODE == MODE_MEMORY || CRASHER_MODE == MODE_DAEMON_ABORT
static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}
#endif

/* A store to an unmapped page near zero: a real SIGSEGV, not a raise(). Not to
 * NULL itself, which UBSan would report (and exit) before the fault happens. */
#if CRASHER_MODE == MODE_SEGV || CRASHER_MODE == MODE_LOAD
/* The address is read from a volatile so that an optimizing compiler neither
 * sees a constant pointer (GCC's -Warray-bounds) nor drops the store. */
static volatile uintptr_t fault_address = 64;
static void segfault(void) {
  volatile int *p = (volatile int *)fault_address;
  *p = 1;
}
#endif

/* Holds every block so nothing can be optimised away or freed. */
static char *volatile blocks[2048];

static int crasher_run(void *instance, const weft_host_services *host, weft_task *task, uint32_t action, char *err,
                       size_t err_len) {
  (void)instance;
  (void)action;
  (void)err;
  (void)err_len;
  host->log(task, WEFT_LOG_INFO, "crasher " CRASHER_TYPE " running");
#if CRASHER_MODE == MODE_SEGV
  segfault();
#elif CRASHER_MODE == MODE_ABORT
  /* The last words of a dying process, as a sanitizer's report or
   * std::terminate's would be: unfinished, and read only once it is gone. */
  fputs("crash-abort: about to abort (no newline)", stderr);
  abort();
#elif CRASHER_MODE == MODE_EXIT
  exit(3);
#elif CRASHER_MODE == MODE_HANG
  for (;;) sleep_ms(50); /* never looks at host->cancelled */
#elif CRASHER_MODE == MODE_MEMORY
  /* 4 MiB every 10 ms, touched so it is resident; capped at 8 GiB so a host
   * without a memory limit does not take the machine down with it. */
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; ++i) {
    blocks[i] = malloc(4u << 20);
    if (blocks[i]) memset(blocks[i], (int)(i & 0xff) | 1, 4u << 20);
    sleep_ms(10);
  }
  for (;;) sleep_ms(50);
#elif CRASHER_MODE == MODE_NOISY
  /* About 2.4 MB each: far more than weft-host logs of one task. */
  for (int i = 0; i < 40000; ++i) {
    printf("noisy-stdout line %d: the quick brown fox jumps over the lazy dog\n", i);
    fprintf(stderr, "noisy-stderr line %d: the lazy dog sleeps under the quick brown fox\n", i);
  }
  fflush(stdout);
#elif CRASHER_MODE == MODE_FLOOD_ABORT
  for (int i = 0; i < 4000; ++i)
    fprintf(stderr, "flood-then-abort line %d: the quick brown fox jumps over the lazy dog\n", i);
  fputs("flood-then-abort: the crash report, written after the flood\n", stderr);
  abort();
#elif CRASHER_MODE == MODE_DAEMON_ABORT
  {
    const pid_t master = getppid();
    const pid_t child = fork();
    if (child == 0) {
      /* Only async-signal-safe calls in the child of a threaded process. It
       * keeps fds 0-2 (the worker's pipes) and lives until the master is gone,
       * at most two minutes. */
      for (int fd = 3; fd < 4096; ++fd) close(fd);
      for (int i = 0; i < 2400 && kill(master, 0) == 0; ++i) sleep_ms(50);
      _exit(0);
    }
    fputs("daemon-then-abort: about to abort (no newline)", stderr);
    abort();
  }
#endif
  return WEFT_OK;
}

static const weft_plugin_descriptor descriptor = {
    sizeof(weft_plugin_descriptor),
    WEFT_ABI_MAJOR,
    WEFT_ABI_MINOR,
    WEFT_KIND_AUTOMATOR,
    CRASHER_TYPE,
    "1.0",
    "crash-isolation fixture: takes its worker down in the action the task names",
    WEFT_ACTION_BOOTSTRAP | WEFT_ACTION_INSTALL | WEFT_ACTION_CONFIGURE | WEFT_ACTION_INITIALIZE | WEFT_ACTION_START |
        WEFT_ACTION_STOP | WEFT_ACTION_REMOVE,
    0u,
    sizeof(weft_field),
    0u,
    NULL,
    NULL,
    NULL,
    crasher_run,
    NULL};

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor *weft_plugin_entry(uint32_t major, uint32_t minor, char *err,
                                                                   size_t err_len) {
  (void)major;
  (void)minor;
  (void)err;
  (void)err_len;
#if CRASHER_MODE == MODE_LOAD
  segfault();
#endif
  return &descriptor;
}
