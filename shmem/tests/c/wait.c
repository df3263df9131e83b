/* wait_until and test, with their _all / _any / _some and vector forms, on
 * variables other PEs write. */
#include "check.h"

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  long *flags = shmem_calloc(n, sizeof(long));
  int *ints = shmem_calloc(n, sizeof(int));
  size_t *idx = malloc(sizeof(size_t) * n);
  /* Before the barrier nobody has written: no PE writes before all arrive. */
  CHECK(!shmem_long_test(&flags[0], SHMEM_CMP_EQ, 1), "test before any write");
  shmem_barrier_all();
  /* Every PE raises its flag on every PE; each waits for all of them. */
  for (int pe = 0; pe < n; pe++) shmem_long_p(&flags[me], 1, pe);
  shmem_long_wait_until_all(flags, n, NULL, SHMEM_CMP_EQ, 1);
  CHECK(shmem_long_test_all(flags, n, NULL, SHMEM_CMP_EQ, 1), "test_all after wait_all");
  /* _any and _some with a status mask that excludes this PE's own flag. */
  int *status = calloc(n, sizeof(int));
  status[me] = 1;
  size_t any = shmem_long_wait_until_any(flags, n, status, SHMEM_CMP_EQ, 1);
  CHECK(n == 1 ? any == SIZE_MAX : (any < (size_t)n && any != (size_t)me), "wait_any=%zu", any);
  size_t some = shmem_long_wait_until_some(flags, n, idx, status, SHMEM_CMP_NE, 0);
  CHECK(some == (size_t)(n - 1), "wait_some=%zu", some);
  for (size_t k = 0; k < some; k++) CHECK(idx[k] != (size_t)me, "some listed the masked index");
  shmem_barrier_all();
  /* The vector forms: PE p writes p + 10 into ints[p] everywhere. */
  int *want = malloc(sizeof(int) * n);
  for (int pe = 0; pe < n; pe++) want[pe] = pe + 10;
  for (int pe = 0; pe < n; pe++) shmem_int_atomic_set(&ints[me], me + 10, pe);
  shmem_int_wait_until_all_vector(ints, n, NULL, SHMEM_CMP_EQ, want);
  CHECK(shmem_int_test_any_vector(ints, n, NULL, SHMEM_CMP_EQ, want) < (size_t)n, "test_any_vector");
  CHECK(shmem_int_test_some_vector(ints, n, idx, NULL, SHMEM_CMP_GE, want) == (size_t)n, "test_some_vector");
  /* A plain wait_until on a cell a neighbour increments, and the generic form. */
  shmem_barrier_all();
  int right = (me + 1) % n;
  shmem_int_atomic_add(&ints[0], 100, right);
  shmem_wait_until(&ints[0], SHMEM_CMP_GE, 100);
  CHECK(shmem_test(&ints[0], SHMEM_CMP_GT, 99), "generic test");
  shmem_finalize();
  if (me == 0) printf("wait: OK on %d PEs\n", n);
  return 0;
}
