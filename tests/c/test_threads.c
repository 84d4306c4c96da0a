/* Any thread may call any function: threads sharing one handle, and threads of a second client,
 * contend for one lock; never two inside at once, every acquisition served. Error messages are
 * per thread. */
#include "harness.h"

#define THREADS_PER_CLIENT 4
#define ROUNDS 10

static pthread_mutex_t guard = PTHREAD_MUTEX_INITIALIZER;
static int inside, max_inside, entries, failures;

typedef struct {
  zkl_lock *lock;
} worker;

static void *contend(void *arg) {
  worker *w = arg;
  for (int round = 0; round < ROUNDS; round++) {
    if (zkl_lock_acquire(w->lock, 60000) != ZKL_OK) {
      __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
      continue;
    }
    pthread_mutex_lock(&guard);
    inside++;
    if (inside > max_inside) max_inside = inside;
    entries++;
    pthread_mutex_unlock(&guard);
    h_sleep_ms(1); /* the protected work */
    pthread_mutex_lock(&guard);
    inside--;
    pthread_mutex_unlock(&guard);
    if (zkl_lock_release(w->lock) != ZKL_OK) __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

typedef struct {
  zkl_lock *lock;
  char message[256];
} failing;

static void *fail_on_this_thread(void *arg) {
  failing *f = arg;
  zkl_lock_acquire(f->lock, -9);
  snprintf(f->message, sizeof f->message, "%s", zkl_last_error_message());
  return NULL;
}

int main(void) {
  zkl_client *a = h_connect(), *b = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "threads");
  zkl_lock *lock_a = NULL, *lock_b = NULL;
  h_require(zkl_lock_new(a, path, &lock_a) == ZKL_OK && zkl_lock_new(b, path, &lock_b) == ZKL_OK, "make the locks");

  pthread_t threads[2 * THREADS_PER_CLIENT];
  worker workers[2] = {{lock_a}, {lock_b}};
  for (int i = 0; i < 2 * THREADS_PER_CLIENT; i++) pthread_create(&threads[i], NULL, contend, &workers[i % 2]);
  for (int i = 0; i < 2 * THREADS_PER_CLIENT; i++) pthread_join(threads[i], NULL);
  CHECK(failures == 0, "threads: every acquire and release succeeded");
  CHECK(entries == 2 * THREADS_PER_CLIENT * ROUNDS, "threads: every acquisition was served");
  CHECK(max_inside == 1, "threads: never two holders at once (same handle and across clients)");
  CHECK(h_contenders(lock_a) == 0, "threads: nothing left behind");

  /* The last error message belongs to the thread that failed. */
  CHECK_ERR(zkl_lock_acquire(lock_a, -5), ZKL_INVALID_ARGUMENT, "timeout_ms is -5", "messages: this thread's failure");
  failing other = {lock_a, ""};
  pthread_t thread;
  pthread_create(&thread, NULL, fail_on_this_thread, &other);
  pthread_join(thread, NULL);
  CHECK(strstr(other.message, "timeout_ms is -9") != NULL, "messages: the other thread sees its own failure");
  CHECK(strstr(zkl_last_error_message(), "timeout_ms is -5") != NULL, "messages: this thread's message is unchanged");
  CHECK_RC(zkl_lock_acquire(lock_a, 0), ZKL_OK, "messages: a success...");
  CHECK(strstr(zkl_last_error_message(), "timeout_ms is -5") != NULL, "messages: ...leaves the last message alone");
  zkl_lock_release(lock_a);

  zkl_lock_free(lock_a);
  zkl_lock_free(lock_b);
  zkl_client_close(a);
  zkl_client_close(b);
  return h_done();
}
