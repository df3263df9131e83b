/* put_signal: the data is visible when the signal is — for a payload
 * larger than one frame too — with SET and ADD, blocking and _nbi. */
#include <string.h>
#include "check.h"

#define BIG (3 << 20) /* larger than pld's 1 MiB frame */
#define ROUNDS 20

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int right = (me + 1) % n, left = (me + n - 1) % n;
  unsigned char *buf = shmem_malloc(BIG);
  uint64_t *sig = shmem_calloc(2, sizeof(uint64_t));
  unsigned char *src = malloc(BIG);
  CHECK(buf && sig && src, "allocations");
  shmem_barrier_all();
  for (int r = 1; r <= ROUNDS; r++) {
    memset(src, (me * 31 + r) & 0xff, BIG);
    size_t len = (r % 2) ? BIG : 8;
    if (r % 3)
      shmem_putmem_signal(buf, src, len, &sig[0], r, SHMEM_SIGNAL_SET, right);
    else
      shmem_putmem_signal_nbi(buf, src, len, &sig[0], r, SHMEM_SIGNAL_SET, right);
    uint64_t v = shmem_signal_wait_until(&sig[0], SHMEM_CMP_GE, r);
    CHECK(v == (uint64_t)r, "signal %lu in round %d", (unsigned long)v, r);
    unsigned char want = (left * 31 + r) & 0xff;
    for (size_t i = 0; i < len; i += 4093) CHECK(buf[i] == want, "round %d: buf[%zu]=%d want %d", r, i, buf[i], want);
    CHECK(buf[len - 1] == want, "round %d: last byte", r);
    /* The left PE may not overwrite buf before this PE has looked. */
    shmem_barrier_all();
  }
  /* ADD: every PE signals PE 0 once; the count is exact. */
  long payload = me;
  static long inbox[64];
  shmem_long_put_signal(&inbox[me % 64], &payload, 1, &sig[1], 1, SHMEM_SIGNAL_ADD, 0);
  if (me == 0) {
    shmem_signal_wait_until(&sig[1], SHMEM_CMP_EQ, n);
    for (int pe = 0; pe < n && pe < 64; pe++) CHECK(inbox[pe] == pe, "inbox[%d]=%ld", pe, inbox[pe]);
    CHECK(shmem_signal_fetch(&sig[1]) == (uint64_t)n, "signal_fetch");
  }
  shmem_finalize();
  if (me == 0) printf("signal: OK on %d PEs\n", n);
  return 0;
}
