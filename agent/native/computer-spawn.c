/*
 * computer-spawn: run a program with no file descriptor open beyond 0, 1 and 2.
 *
 *   computer-spawn -|3 PROGRAM [ARG...]
 *
 * Why: the agent (root) holds pty masters that node-pty opens without close-on-exec, and Node has
 * no fcntl to set it. Every process the agent starts goes through this step, so no master (nor any
 * other agent fd) reaches a guest process: an `agent`-user process holding a root terminal's master
 * could type into it. The kernel closes the fds (close_range), so there is nothing to emulate.
 *
 * With `3`, fd 3 is a status pipe from the agent: it is closed by a successful exec (close-on-exec),
 * and a failed exec writes the errno there as decimal text, so the agent can tell "could not start"
 * (a 400) from "ran and exited 127". PROGRAM is looked up in the PATH of the environment given.
 * Nothing in the environment is interpreted here (no shell), so a caller's env cannot run code before
 * the fds are closed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static void close_from(unsigned lowest) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, lowest, ~0U, 0) == 0) return;
#endif
  /* Kernels before 5.9: every possible fd up to the limit. */
  struct rlimit rl;
  unsigned long max = 65536;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (1UL << 20)) max = rl.rlim_max;
  for (unsigned long fd = lowest; fd < max; fd++) close((int)fd);
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "-") != 0 && strcmp(argv[1], "3") != 0)) {
    static const char usage[] = "usage: computer-spawn -|3 PROGRAM [ARG...]\n";
    (void)!write(2, usage, sizeof usage - 1);
    return 127;
  }
  int status = argv[1][0] == '3';
  if (status) {
    if (fcntl(3, F_SETFD, FD_CLOEXEC) != 0) return 127;
    close_from(4);
  } else {
    close_from(3);
  }
  execvp(argv[2], argv + 2);
  int err = errno;
  if (status) {
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%d", err);
    (void)!write(3, buf, (size_t)n);
  }
  return 127;
}
