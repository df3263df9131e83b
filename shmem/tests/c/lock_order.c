/* The MCS lock's promises (docs/shmem.md, "Locks"), argv[1]:
 *  "fifo": PE 0 holds the lock while PEs 1..n-1 queue one after another
 *          (each joins once the queue's tail, the lock's first 32-bit
 *          cell on PE 0, says the PE before it has joined); the lock must
 *          then pass to them in that order.
 *  "timeout": PE 0 takes the lock and keeps it; PE 1's set_lock must fail
 *          at the job's timeout naming the lock and the PE ahead of it. */
#include <string.h>
#include <unistd.h>
#include "check.h"

#define MAX_PES 64

static long lock;
static long next_slot;
static long order[MAX_PES];

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  CHECK(n <= MAX_PES, "at most %d PEs", MAX_PES);
  int *tail = (int *)&lock;
  if (strcmp(mode, "fifo") == 0) {
    if (me == 0) shmem_set_lock(&lock);
    shmem_barrier_all();
    if (me == 0) {
      /* Every other PE has queued: the tail is the last one, plus one. */
      while (*(volatile int *)tail != n) usleep(100);
    } else {
      while (shmem_int_g(tail, 0) != me) usleep(100);
      shmem_set_lock(&lock);
      long at = shmem_long_atomic_fetch_inc(&next_slot, 0);
      shmem_long_p(&order[at], me, 0);
    }
    shmem_clear_lock(&lock);
    shmem_barrier_all();
    if (me == 0) {
      CHECK(next_slot == n - 1, "%ld holders, want %d", next_slot, n - 1);
      for (int i = 0; i < n - 1; i++)
        CHECK(order[i] == i + 1, "holder %d was PE %ld, want PE %d (arrival order)", i, order[i],
              i + 1);
      printf("lock_order: OK on %d PEs\n", n);
    }
  } else if (strcmp(mode, "timeout") == 0) {
    if (me == 0) shmem_set_lock(&lock);
    shmem_barrier_all();
    if (me == 1) {
      shmem_set_lock(&lock);
      printf("PE 1 took a lock PE 0 holds\n");
      return 3;
    }
    /* PE 0 keeps the lock; the launcher stops it once PE 1 fails. */
    sleep(120);
  } else {
    CHECK(0, "no mode '%s'", mode);
  }
  shmem_finalize();
  return 0;
}
