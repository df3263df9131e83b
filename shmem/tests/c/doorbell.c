/* Waits that sleep while other PEs write into their memory: each round,
 * every PE hammers its right neighbour's heap counter with fetching
 * atomics, then all meet in a barrier. Through shared memory every one
 * of those writes rings the neighbour's doorbell while it may be falling
 * asleep in the barrier; a lost wake-up shows as a barrier that times
 * out. The counts check the atomics. */
#include "check.h"

#define ROUNDS 30
#define HITS 5000

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int right = (me + 1) % n;
  long *counter = shmem_calloc(1, sizeof(long));
  CHECK(counter, "allocation");
  for (int r = 0; r < ROUNDS; r++) {
    /* Some PEs reach the barrier early and sleep there while others
     * still write into their heaps. */
    int hits = (me % 2 == 0) ? HITS : HITS / 10;
    for (int i = 0; i < hits; i++) shmem_long_atomic_fetch_inc(counter, right);
    shmem_barrier_all();
    int left = (me + n - 1) % n;
    long want = 0;
    for (int k = 0; k <= r; k++) want += (left % 2 == 0) ? HITS : HITS / 10;
    CHECK(*counter == want, "round %d: counter %ld, want %ld", r, *counter, want);
    shmem_barrier_all();
  }
  shmem_free(counter);
  shmem_finalize();
  if (me == 0) printf("doorbell: OK on %d PEs\n", n);
  return 0;
}
