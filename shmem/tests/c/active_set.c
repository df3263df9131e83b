/* The 1.4 active-set collectives: barrier and sync, broadcast32/64 (the
 * root's dest left as it was), collect / fcollect / alltoall / alltoalls
 * 32 and 64, and the to_all reductions of every type — over the whole
 * job, the even PEs (logPE_stride 1) and PEs 1.. (a set that leaves PE 0
 * out). pSync holds SHMEM_SYNC_VALUE again after every call. */
#include <string.h>
#include "check.h"

#define N 4
#define MAXPES 16

static long psync[SHMEM_REDUCE_SYNC_SIZE];
static long psync2[SHMEM_BARRIER_SYNC_SIZE];
static long pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
static int64_t s64[N * MAXPES], d64[N * MAXPES * 3];
static int32_t s32[N * MAXPES], d32[N * MAXPES * 3];

/* The active set being tested. */
static int set_start, set_log, set_size;

/* Every member has left the last call on psync (a barrier over another
 * pSync), so no signal of a later call is on its way: psync must hold
 * SHMEM_SYNC_VALUE everywhere. A second barrier keeps the members from
 * starting the next call before this one has looked. */
static void psync_is_clean(const char *after) {
  shmem_sync(set_start, set_log, set_size, psync2);
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
    CHECK(psync[i] == SHMEM_SYNC_VALUE, "pSync[%d] is %ld after %s", i, psync[i], after);
  shmem_sync(set_start, set_log, set_size, psync2);
}

/* The specification lets a PE reuse a pSync, or write a dest another
 * member's call writes, only once every member has left the last call on
 * it: a sync over another pSync between calls. */
static void apart(void) { shmem_sync(set_start, set_log, set_size, psync2); }

#define V(p, i) (((p) * 3 + (i)) % 11 + 1)

#define TO_ALL_ARITH(T, NAME)                                                         \
  static void to_all_##NAME(int start, int log, int size, int idx) {                  \
    static T src[N], dst[N];                                                          \
    const char *ops[4] = {"sum", "prod", "max", "min"};                               \
    for (int op = 0; op < 4; op++) {                                                  \
      for (int i = 0; i < N; i++)                                                     \
        src[i] = (T)(op == 1 ? (idx == i % size ? 2 : 1) : op == 0 ? (shmem_my_pe() + i) % 5 + 1 : V(shmem_my_pe(), i)); \
      apart();                                                                        \
      switch (op) {                                                                   \
      case 0: shmem_##NAME##_sum_to_all(dst, src, N, start, log, size, (T *)pwrk, psync); break; \
      case 1: shmem_##NAME##_prod_to_all(dst, src, N, start, log, size, (T *)pwrk, psync); break; \
      case 2: shmem_##NAME##_max_to_all(dst, src, N, start, log, size, (T *)pwrk, psync); break; \
      default: shmem_##NAME##_min_to_all(dst, src, N, start, log, size, (T *)pwrk, psync); break; \
      }                                                                               \
      psync_is_clean(#NAME "_to_all");                                                \
      for (int i = 0; i < N; i++) {                                                   \
        T want = 0;                                                                   \
        for (int k = 0; k < size; k++) {                                              \
          int pe = start + k * (1 << log);                                            \
          T y = (T)(op == 1 ? (k == i % size ? 2 : 1) : op == 0 ? (pe + i) % 5 + 1 : V(pe, i)); \
          want = k == 0 ? y : op == 0 ? want + y : op == 1 ? want * y : op == 2 ? (want > y ? want : y) : (want < y ? want : y); \
        }                                                                             \
        CHECK(dst[i] == want, #NAME "_%s_to_all set (%d, %d, %d) [%d]", ops[op], start, log, size, i); \
      }                                                                               \
    }                                                                                 \
  }
PLD_SHMEM_TO_ALL_ARITH_TYPES(TO_ALL_ARITH)
TO_ALL_ARITH(long double, longdouble)

#define TO_ALL_BIT(T, NAME)                                                           \
  static void bits_##NAME(int start, int log, int size) {                             \
    static T src[N], dst[N];                                                          \
    for (int i = 0; i < N; i++) src[i] = (T)((1 << ((shmem_my_pe() + i) % 7)) | 1);   \
    apart();                                                                          \
    shmem_##NAME##_or_to_all(dst, src, N, start, log, size, (T *)pwrk, psync);        \
    for (int i = 0; i < N; i++) {                                                     \
      T want = 0;                                                                     \
      for (int k = 0; k < size; k++) want |= (T)((1 << ((start + k * (1 << log) + i) % 7)) | 1); \
      CHECK(dst[i] == want, #NAME "_or_to_all [%d]", i);                              \
    }                                                                                 \
    apart();                                                                          \
    shmem_##NAME##_and_to_all(dst, src, N, start, log, size, (T *)pwrk, psync);       \
    for (int i = 0; i < N; i++) {                                                     \
      T want = (T)~0;                                                                 \
      for (int k = 0; k < size; k++) want &= (T)((1 << ((start + k * (1 << log) + i) % 7)) | 1); \
      CHECK(dst[i] == want, #NAME "_and_to_all [%d]", i);                             \
    }                                                                                 \
    apart();                                                                          \
    shmem_##NAME##_xor_to_all(dst, src, N, start, log, size, (T *)pwrk, psync);       \
    for (int i = 0; i < N; i++) {                                                     \
      T want = 0;                                                                     \
      for (int k = 0; k < size; k++) want ^= (T)((1 << ((start + k * (1 << log) + i) % 7)) | 1); \
      CHECK(dst[i] == want, #NAME "_xor_to_all [%d]", i);                             \
    }                                                                                 \
    psync_is_clean(#NAME " bitwise to_all");                                          \
  }
PLD_SHMEM_TO_ALL_BIT_TYPES(TO_ALL_BIT)

static void on_set(int start, int log, int size) {
  int me = shmem_my_pe(), stride = 1 << log;
  if (me < start || (me - start) % stride != 0 || (me - start) / stride >= size)
    return;
  int idx = (me - start) / stride;
  set_start = start;
  set_log = log;
  set_size = size;
  shmem_barrier(start, log, size, psync);
  psync_is_clean("shmem_barrier");
  shmem_sync(start, log, size, psync2);
  for (int i = 0; i < N * MAXPES; i++) { s64[i] = V(me, i); s32[i] = V(me, i) * 7; }
  /* broadcast: every member but the root gets the root's source. */
  for (int root = 0; root < size; root++) {
    for (int i = 0; i < N; i++) { d64[i] = -1; d32[i] = -1; }
    apart();
    shmem_broadcast64(d64, s64, N, root, start, log, size, psync);
    psync_is_clean("shmem_broadcast64");
    apart();
    shmem_broadcast32(d32, s32, N, root, start, log, size, psync);
    for (int i = 0; i < N; i++) {
      int from = start + root * stride;
      CHECK(d64[i] == (idx == root ? -1 : V(from, i)), "broadcast64 root %d [%d] = %ld", root, i, (long)d64[i]);
      CHECK(d32[i] == (idx == root ? -1 : V(from, i) * 7), "broadcast32 root %d [%d]", root, i);
    }
  }
  apart();
  shmem_fcollect64(d64, s64, N, start, log, size, psync);
  apart();
  shmem_fcollect32(d32, s32, N, start, log, size, psync);
  for (int k = 0; k < size; k++)
    for (int i = 0; i < N; i++) {
      CHECK(d64[k * N + i] == V(start + k * stride, i), "fcollect64 [%d][%d]", k, i);
      CHECK(d32[k * N + i] == V(start + k * stride, i) * 7, "fcollect32 [%d][%d]", k, i);
    }
  apart();
  shmem_collect64(d64, s64, (size_t)(idx + 1), start, log, size, psync);
  psync_is_clean("shmem_collect64");
  apart();
  shmem_collect32(d32, s32, (size_t)(idx + 1), start, log, size, psync);
  for (int k = 0, at = 0; k < size; k++)
    for (int i = 0; i <= k; i++, at++) {
      CHECK(d64[at] == V(start + k * stride, i), "collect64 from %d [%d]", k, i);
      CHECK(d32[at] == V(start + k * stride, i) * 7, "collect32 from %d [%d]", k, i);
    }
  apart();
  shmem_alltoall64(d64, s64, N, start, log, size, psync);
  apart();
  shmem_alltoall32(d32, s32, N, start, log, size, psync);
  for (int k = 0; k < size; k++)
    for (int i = 0; i < N; i++) {
      CHECK(d64[k * N + i] == V(start + k * stride, idx * N + i), "alltoall64 from %d [%d]", k, i);
      CHECK(d32[k * N + i] == V(start + k * stride, idx * N + i) * 7, "alltoall32 from %d [%d]", k, i);
    }
  apart();
  shmem_alltoalls64(d64, s64, 2, 3, 1, start, log, size, psync);
  apart();
  shmem_alltoalls32(d32, s32, 2, 3, 1, start, log, size, psync);
  for (int k = 0; k < size; k++) {
    CHECK(d64[k * 2] == V(start + k * stride, idx * 3), "alltoalls64 from %d", k);
    CHECK(d32[k * 2] == V(start + k * stride, idx * 3) * 7, "alltoalls32 from %d", k);
  }
  psync_is_clean("shmem_alltoalls32");
#define RUN_ARITH(T, NAME) to_all_##NAME(start, log, size, idx);
#define RUN_BIT(T, NAME) bits_##NAME(start, log, size);
  PLD_SHMEM_TO_ALL_ARITH_TYPES(RUN_ARITH)
  to_all_longdouble(start, log, size, idx);
  PLD_SHMEM_TO_ALL_BIT_TYPES(RUN_BIT)
  /* The complex sums. */
  static double _Complex zs[N], zd[N];
  for (int i = 0; i < N; i++) zs[i] = (me + i) + 1.0 * (double _Complex)(__extension__ 1.0iF);
  apart();
  shmem_complexd_sum_to_all(zd, zs, N, start, log, size, (double _Complex *)pwrk, psync);
  for (int i = 0; i < N; i++) {
    double _Complex want = 0;
    for (int k = 0; k < size; k++) want += (start + k * stride + i) + 1.0 * (double _Complex)(__extension__ 1.0iF);
    CHECK(zd[i] == want, "complexd_sum_to_all [%d]", i);
  }
  psync_is_clean("the reductions");
}

int main(void) {
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) psync[i] = SHMEM_SYNC_VALUE;
  for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++) psync2[i] = SHMEM_SYNC_VALUE;
  shmem_init();
  int n = shmem_n_pes();
  CHECK(n <= MAXPES, "at most %d PEs", MAXPES);
  on_set(0, 0, n);
  shmem_barrier_all();
  on_set(0, 1, (n + 1) / 2);
  shmem_barrier_all();
  if (n > 1)
    on_set(1, 0, n - 1);
  shmem_barrier_all();
  if (shmem_my_pe() == 0)
    printf("active sets: OK on %d PEs\n", n);
  shmem_finalize();
  return 0;
}
