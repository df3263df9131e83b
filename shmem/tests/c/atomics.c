/* Every atomic of this part, under contention from all PEs at once, with
 * exact results: counters, claims, swaps, bit sets, and the _nbi fetches. */
#include "check.h"

#define ROUNDS 200
static long long counter_ll;
static unsigned int bits_u;
static uint64_t bits64;

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int *count_i = shmem_calloc(1, sizeof(int));
  long *count_l = shmem_calloc(1, sizeof(long));
  long *slots = shmem_calloc(ROUNDS, sizeof(long));
  int *token = shmem_calloc(1, sizeof(int));
  double *dcell = shmem_calloc(1, sizeof(double));
  float *fcell = shmem_calloc(1, sizeof(float));
  uint32_t *xor32 = shmem_calloc(1, sizeof(uint32_t));
  int64_t *fetched = shmem_calloc(1, sizeof(int64_t));
  shmem_barrier_all();

  /* fetch_add / fetch_inc / add / inc on PE 0, from every PE at once: the
   * fetched values are all distinct and the total is exact. */
  int seen[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    seen[r] = shmem_int_atomic_fetch_add(count_i, 2, 0);
    shmem_long_atomic_inc(count_l, 0);
    shmem_longlong_atomic_add(&counter_ll, me + 1, 0);
  }
  for (int r = 0; r < ROUNDS; r++) shmem_atomic_fetch_inc(count_l, 0);
  for (int r = 1; r < ROUNDS; r++) CHECK(seen[r] > seen[r - 1] && seen[r] % 2 == 0, "fetch_add order %d %d", seen[r - 1], seen[r]);
  shmem_barrier_all();
  if (me == 0) {
    CHECK(*count_i == 2 * ROUNDS * n, "count_i=%d", *count_i);
    CHECK(*count_l == 2L * ROUNDS * n, "count_l=%ld", *count_l);
    CHECK(counter_ll == (long long)ROUNDS * n * (n + 1) / 2, "counter_ll=%lld", counter_ll);
  }

  /* compare_swap: each slot is claimed by exactly one PE. */
  int claimed = 0;
  for (int r = 0; r < ROUNDS; r++)
    if (shmem_long_atomic_compare_swap(&slots[r], 0, me + 1, 0) == 0) claimed++;
  int *claims = shmem_calloc(1, sizeof(int));
  shmem_int_atomic_add(claims, claimed, 0);
  shmem_barrier_all();
  if (me == 0) {
    CHECK(*claims == ROUNDS, "claims=%d", *claims);
    for (int r = 0; r < ROUNDS; r++) CHECK(slots[r] >= 1 && slots[r] <= n, "slot %d=%ld", r, slots[r]);
  }

  /* swap: a token passed around by swaps is never lost or duplicated. The
   * values each PE swapped out, plus what is left, are every value once. */
  long got_sum = 0;
  for (int r = 0; r < ROUNDS; r++) got_sum += shmem_int_atomic_swap(token, me * ROUNDS + r + 1, 0);
  long *sums = shmem_calloc(1, sizeof(long));
  shmem_long_atomic_add(sums, got_sum, 0);
  shmem_barrier_all();
  if (me == 0) {
    long total = 0;
    for (long v = 1; v <= (long)n * ROUNDS; v++) total += v;
    CHECK(*sums + *token == total, "swap sums %ld + %d != %ld", *sums, *token, total);
  }

  /* or / and / xor: each PE sets its bit, flips a bit twice, clears one. */
  shmem_uint_atomic_or(&bits_u, 1u << me, 0);
  shmem_uint64_atomic_fetch_or(&bits64, (uint64_t)1 << (me + 32), 0);
  shmem_uint32_atomic_xor(xor32, 0xffu << me, 0);
  shmem_uint32_atomic_fetch_xor(xor32, 0xffu << me, 0);
  shmem_barrier_all();
  if (me == 0) {
    CHECK(bits_u == (1u << n) - 1, "or bits=%x", bits_u);
    CHECK(bits64 == (((uint64_t)1 << n) - 1) << 32, "fetch_or bits64=%lx", (unsigned long)bits64);
    CHECK(*xor32 == 0, "xor twice=%x", *xor32);
  }
  shmem_barrier_all();
  unsigned int before = shmem_uint_atomic_fetch_and(&bits_u, ~(1u << me), 0);
  CHECK(before & (1u << me), "fetch_and saw my bit clear already: %x", before);
  shmem_ulong_atomic_and((unsigned long *)&bits64, 0, 0);
  shmem_barrier_all();
  if (me == 0) CHECK(bits_u == 0 && bits64 == 0, "and left %x %lx", bits_u, (unsigned long)bits64);

  /* fetch / set, and the floating-point forms. */
  if (me == 0) shmem_double_atomic_set(dcell, 2.5, n - 1);
  shmem_barrier_all();
  CHECK(shmem_double_atomic_fetch(dcell, n - 1) == 2.5, "double fetch");
  /* Each PE swaps in its own value, me + 1: the values swapped out, with
   * the one left in the cell, are the cell's 0 and every PE's, once each. */
  float old = shmem_float_atomic_swap(fcell, (float)(me + 1), 0);
  CHECK(old >= 0 && old <= n && old == (float)(int)old, "float swap returned %f", old);
  static float olds[64];
  shmem_float_p(&olds[me], old, 0);
  shmem_barrier_all();
  if (me == 0) {
    int seen[65] = {0};
    for (int i = 0; i < n; i++) seen[(int)olds[i]]++;
    seen[(int)*fcell]++;
    for (int v = 0; v <= n; v++) CHECK(seen[v] == 1, "value %d swapped out or left %d times", v, seen[v]);
  }
  shmem_atomic_set(count_i, 5, me);
  CHECK(shmem_atomic_fetch(count_i, me) == 5, "own fetch");

  /* The _nbi fetches land by quiet. */
  shmem_barrier_all();
  int64_t mine = -1;
  shmem_int64_atomic_fetch_add_nbi(&mine, fetched, 10, 0);
  int32_t cs = -1;
  shmem_int32_atomic_compare_swap_nbi(&cs, (int32_t *)count_i, 5, 6, me);
  uint64_t fx = 0;
  shmem_uint64_atomic_fetch_xor_nbi(&fx, (uint64_t *)fetched, 0, 0);
  shmem_quiet();
  CHECK(mine >= 0 && mine % 10 == 0 && mine < 10 * n, "fetch_add_nbi=%ld", (long)mine);
  CHECK(cs == 5 && *count_i == 6, "compare_swap_nbi cs=%d cell=%d", cs, *count_i);
  CHECK(fx % 10 == 0, "fetch_xor_nbi=%lu", (unsigned long)fx);
  int f = -1;
  shmem_int_atomic_fetch_nbi(&f, count_i, me);
  shmem_quiet();
  CHECK(f == 6, "fetch_nbi=%d", f);
  shmem_barrier_all();
  if (me == 0) CHECK(*fetched == 10 * n, "fetched=%ld", (long)*fetched);

  shmem_finalize();
  if (me == 0) printf("atomics: OK on %d PEs\n", n);
  return 0;
}
