/* fence: a put after the fence lands after the puts before it, so a PE
 * that sees the flag sees the data; quiet completes both. */
#include "check.h"

#define ROUNDS 500

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int right = (me + 1) % n;
  static long data[16];
  static long flag;
  for (long r = 1; r <= ROUNDS; r++) {
    long payload[16];
    for (int i = 0; i < 16; i++) payload[i] = r * 100 + i;
    shmem_long_put(data, payload, 16, right);
    shmem_fence();
    shmem_long_atomic_set(&flag, r, right);
    shmem_long_wait_until(&flag, SHMEM_CMP_EQ, r);
    for (int i = 0; i < 16; i++) CHECK(data[i] == r * 100 + i, "round %ld: data[%d]=%ld", r, i, data[i]);
    /* Nobody writes the next round before this PE has looked. */
    shmem_sync_all();
  }
  shmem_quiet();
  shmem_finalize();
  if (me == 0) printf("fence: OK on %d PEs\n", n);
  return 0;
}
