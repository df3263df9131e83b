/* fence: a put after the fence lands after the puts before it, so a PE
 * that sees the flag sees the data; quiet completes both. Three pairings
 * of where data and flag live, because with shared memory they take
 * different paths: static data goes over pld's links and heap data is a
 * copy into the mapped heap, so "static data, then a heap flag" is the
 * one where the fence has work to do (the link must deliver before the
 * flag's CPU store); without shared memory all three go over the links. */
#include "check.h"

#define ROUNDS 300

static long sdata[16];
static long sflag;

/* One pairing: `data` and `flag` on the next PE. */
static void rounds(const char *what, long *data, long *flag, long base) {
  int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n;
  for (long r = base + 1; r <= base + ROUNDS; r++) {
    long payload[16];
    for (int i = 0; i < 16; i++) payload[i] = r * 100 + i;
    shmem_long_put(data, payload, 16, right);
    shmem_fence();
    shmem_long_atomic_set(flag, r, right);
    shmem_long_wait_until(flag, SHMEM_CMP_EQ, r);
    for (int i = 0; i < 16; i++)
      CHECK(data[i] == r * 100 + i, "%s, round %ld: data[%d]=%ld", what, r, i, data[i]);
    /* Nobody writes the next round before this PE has looked. */
    shmem_sync_all();
  }
}

int main(void) {
  shmem_init();
  long *hdata = shmem_calloc(16, sizeof(long));
  long *hflag = shmem_calloc(1, sizeof(long));
  rounds("static data, static flag", sdata, &sflag, 0);
  rounds("static data, heap flag", sdata, hflag, ROUNDS);
  rounds("heap data, static flag", hdata, &sflag, 2 * ROUNDS);
  shmem_quiet();
  shmem_free(hflag);
  shmem_free(hdata);
  shmem_finalize();
  if (shmem_my_pe() == 0) printf("fence: OK on %d PEs\n", shmem_n_pes());
  return 0;
}
