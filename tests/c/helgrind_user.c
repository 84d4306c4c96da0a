/* A program that uses zklock from two threads, run under helgrind with zklock's suppressions
 * (share/zklock/zklock.supp): none of zklock's internals may be reported. Built with
 * -DUSER_RACE it also has a data race of its own, which must still be reported. */
#define _GNU_SOURCE
#include "harness.h"

static long counter;
static zkl_client *client;
static char path[200];

static void *worker(void *arg) {
  (void)arg;
  zkl_lock *lock;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "lock");
  h_require(zkl_lock_acquire(lock, 20000) == ZKL_OK, "acquire");
#ifdef USER_RACE
  counter++; /* outside any lock of the process: a race helgrind must report */
#endif
  h_require(zkl_lock_release(lock) == ZKL_OK, "release");
  zkl_lock_free(lock);
  return NULL;
}

int main(void) {
  client = h_connect();
  h_unique_path(path, sizeof path, "helgrind");
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, worker, NULL);
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  zkl_client_close(client);
  printf("counter %ld\n", counter);
  return 0;
}
