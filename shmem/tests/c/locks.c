/* Distributed locks: mutual exclusion under contention from every PE —
 * an occupancy cell on PE 0 that only the holder may find empty, and a
 * counter on PE 0 updated by get + put (not atomically) inside the lock,
 * exact at the end; test_lock fails while another PE holds the lock and
 * succeeds once it is free; clear_lock completes the holder's puts. */
#include "check.h"

#define ROUNDS 30

static long lock, lock2;
static long inside, counter;

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  shmem_barrier_all();
  for (int r = 0; r < ROUNDS; r++) {
    shmem_set_lock(&lock);
    /* Nobody else is inside: the occupancy cell was empty. */
    long was = shmem_long_atomic_swap(&inside, me + 1, 0);
    CHECK(was == 0, "PE %ld was inside the lock with this PE (round %d)", was - 1, r);
    long c = shmem_long_g(&counter, 0);
    shmem_long_p(&counter, c + 1, 0);
    was = shmem_long_atomic_swap(&inside, 0, 0);
    CHECK(was == me + 1, "the occupancy cell changed under this PE: %ld", was);
    shmem_clear_lock(&lock);
  }
  shmem_barrier_all();
  if (me == 0)
    CHECK(counter == (long)n * ROUNDS, "counter %ld, want %ld", counter, (long)n * ROUNDS);

  /* test_lock: PE 0 holds lock2, every other PE finds it taken. */
  if (me == 0)
    CHECK(shmem_test_lock(&lock2) == 0, "a free lock is taken by test_lock");
  shmem_barrier_all();
  if (me != 0)
    CHECK(shmem_test_lock(&lock2) == 1, "a held lock is not taken");
  shmem_barrier_all();
  if (me == 0)
    shmem_clear_lock(&lock2);
  shmem_barrier_all();
  if (me == n - 1) {
    CHECK(shmem_test_lock(&lock2) == 0, "the freed lock is taken");
    shmem_clear_lock(&lock2);
  }
  /* Every PE at once through test_lock: exactly one wins each round. */
  for (int r = 0; r < 5; r++) {
    shmem_barrier_all();
    int got = shmem_test_lock(&lock2) == 0;
    if (got)
      shmem_long_atomic_inc(&counter, 0);
    shmem_barrier_all();
    if (me == 0)
      CHECK(counter == (long)n * ROUNDS + r + 1, "one winner per round: counter %ld", counter);
    shmem_barrier_all();
    if (got)
      shmem_clear_lock(&lock2);
  }
  shmem_barrier_all();
  if (me == 0)
    printf("locks: OK on %d PEs\n", n);
  shmem_finalize();
  return 0;
}
