/* The testkit's fault proxy (zklock-proxy, named by ZKLOCK_PROXY) in front of the first server of
 * ZK_CONNECT: told to stall, it passes no traffic, so the client declares its holds lost and the
 * server expires the session for real. */
#ifndef ZKLOCK_TEST_PROXY_H
#define ZKLOCK_TEST_PROXY_H

#include "harness.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

typedef struct {
  pid_t pid;
  FILE *in, *out;
  char address[64];
} proxy;

/* Starts zklock-proxy in front of the first server of ZK_CONNECT. */
static inline void proxy_start(proxy *p) {
  const char *program = getenv("ZKLOCK_PROXY");
  h_require(program != NULL, "ZKLOCK_PROXY names the zklock-proxy program");
  char upstream[256];
  snprintf(upstream, sizeof upstream, "%s", h_zk_connect());
  upstream[strcspn(upstream, ",/")] = '\0';
  int to_proxy[2], from_proxy[2];
  h_require(pipe2(to_proxy, O_CLOEXEC) == 0 && pipe2(from_proxy, O_CLOEXEC) == 0, "pipes");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_proxy[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_proxy[1], 1);
  char *argv[] = {(char *)program, upstream, NULL};
  h_require(posix_spawn(&p->pid, program, &actions, NULL, argv, environ) == 0, "start zklock-proxy");
  posix_spawn_file_actions_destroy(&actions);
  close(to_proxy[0]);
  close(from_proxy[1]);
  p->in = fdopen(to_proxy[1], "w");
  p->out = fdopen(from_proxy[0], "r");
  char line[128] = "";
  h_require(fgets(line, sizeof line, p->out) != NULL && sscanf(line, "LISTEN %63s", p->address) == 1,
            "zklock-proxy listens");
}

/* Sends a command (pass, stall, cut) and waits for the proxy's "OK <command>". */
static inline int proxy_command(proxy *p, const char *command) {
  fprintf(p->in, "%s\n", command);
  fflush(p->in);
  char line[128] = "", expected[128];
  snprintf(expected, sizeof expected, "OK %s\n", command);
  return fgets(line, sizeof line, p->out) != NULL && strcmp(line, expected) == 0;
}

static inline void proxy_stop(proxy *p) {
  fclose(p->in); /* the proxy exits on end of input */
  int status = 0;
  waitpid(p->pid, &status, 0);
  fclose(p->out);
}

/* Connects through the proxy, with ZK_CONNECT's chroot (if any) so that clients connected
 * directly see the same paths. */
static inline zkl_client *proxy_connect(proxy *p, const zkl_options *opts) {
  char through_proxy[512];
  const char *chroot = strchr(h_zk_connect(), '/');
  snprintf(through_proxy, sizeof through_proxy, "%s%s", p->address, chroot != NULL ? chroot : "");
  zkl_client *client = NULL;
  h_require(zkl_client_connect(through_proxy, opts, &client) == ZKL_OK, "connect through the proxy");
  return client;
}

#endif
