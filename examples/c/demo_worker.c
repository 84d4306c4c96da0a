/* A C worker for the README demo (scripts/demo): it contends for the demo's lock with the Rust
 * workers and prints one line per hold, in the demo's format:
 *
 *   HELD name pid fencing_token sequence enter_us exit_us c
 *
 * Usage: ZK_CONNECT=host:port demo_worker NAME ROUNDS
 * Build: cc demo_worker.c $(pkg-config --cflags --libs zklock) -o demo_worker */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <zklock.h>

#define LOCK_PATH "/zklock-demo/lock"

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int fail(const char *name, const char *what, zkl_result rc) {
  fprintf(stderr, "%s: %s: %s (%s)\n", name, what, zkl_result_str(rc), zkl_last_error_message());
  return 1;
}

int main(int argc, char **argv) {
  const char *name = argc > 1 ? argv[1] : "c";
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  const char *connect = getenv("ZK_CONNECT");
  if (connect == NULL) {
    fprintf(stderr, "%s: ZK_CONNECT is not set\n", name);
    return 2;
  }

  zkl_client *client = NULL;
  zkl_lock *lock = NULL;
  zkl_result rc = zkl_client_connect(connect, NULL, &client);
  if (rc != ZKL_OK) return fail(name, "connect", rc);
  rc = zkl_lock_new(client, LOCK_PATH, &lock);
  if (rc != ZKL_OK) return fail(name, "lock", rc);

  int status = 0;
  for (int round = 0; round < rounds && status == 0; round++) {
    rc = zkl_lock_acquire(lock, -1);
    if (rc != ZKL_OK) {
      status = fail(name, "acquire", rc);
      break;
    }
    int64_t token = 0, sequence = 0;
    zkl_lock_fencing_token(lock, &token);
    zkl_lock_sequence(lock, &sequence);
    int64_t entered = now_us();
    /* The protected work: hold briefly so the others queue up behind us. */
    struct timespec work = {0, 50 * 1000 * 1000};
    nanosleep(&work, NULL);
    int64_t exited = now_us();
    printf("HELD %s %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " c\n", name, (int)getpid(), token, sequence,
           entered, exited);
    fflush(stdout);
    rc = zkl_lock_release(lock);
    if (rc != ZKL_OK) status = fail(name, "release", rc);
  }

  zkl_lock_free(lock);
  zkl_client_close(client);
  return status;
}
