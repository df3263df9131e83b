/* RMA on the symmetric heap and on static data: putmem/getmem, typed
 * put/get/p/g, strided iput/iget, the _nbi forms and the sized routines,
 * from every PE to every PE. */
#include <string.h>
#include "check.h"

#define N 64
static long static_longs[N * 8];
static double static_doubles[8];
int global_ints[8];

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  int right = (me + 1) % n, left = (me + n - 1) % n;
  char *heap = shmem_malloc(N * n);
  long *longs = shmem_malloc(sizeof(long) * N);
  int *ints = shmem_calloc(N, sizeof(int));
  CHECK(heap && longs && ints, "allocations");
  for (int i = 0; i < N; i++) ints[i] = -1;

  /* putmem: every PE writes its slot of every PE's heap buffer. */
  char mine[N];
  memset(mine, 'a' + me, N);
  for (int pe = 0; pe < n; pe++) shmem_putmem(heap + me * N, mine, N, pe);
  shmem_barrier_all();
  for (int pe = 0; pe < n; pe++)
    for (int i = 0; i < N; i++) CHECK(heap[pe * N + i] == 'a' + pe, "heap[%d]=%d", pe * N + i, heap[pe * N + i]);

  /* getmem from the left neighbour's heap. */
  char got[N];
  shmem_getmem(got, heap + left * N, N, left);
  for (int i = 0; i < N; i++) CHECK(got[i] == 'a' + left, "got[%d]=%d", i, got[i]);

  /* Typed put into static data and a global, typed get back. */
  long src[N];
  for (int i = 0; i < N; i++) src[i] = me * 1000 + i;
  shmem_long_put(static_longs + me * N, src, N, right);
  shmem_double_p(&static_doubles[me % 8], me + 0.5, right);
  shmem_int_p(&global_ints[me % 8], me * 7, right);
  shmem_barrier_all();
  for (int i = 0; i < N; i++) CHECK(static_longs[left * N + i] == left * 1000 + i, "static_longs[%d]=%ld", i, static_longs[left * N + i]);
  CHECK(static_doubles[left % 8] == left + 0.5, "static_doubles=%f", static_doubles[left % 8]);
  CHECK(global_ints[left % 8] == left * 7, "global_ints=%d", global_ints[left % 8]);
  long back[N];
  shmem_long_get(back, static_longs + me * N, N, right);
  for (int i = 0; i < N; i++) CHECK(back[i] == src[i], "back[%d]=%ld", i, back[i]);
  CHECK(shmem_double_g(&static_doubles[me % 8], right) == me + 0.5, "double g");
  CHECK(shmem_int_g(&global_ints[me % 8], right) == me * 7, "int g");
  shmem_barrier_all();

  /* Strided: every 3rd element of the source to every 2nd of the target. */
  long strided[3 * N];
  for (int i = 0; i < 3 * N; i++) strided[i] = (i % 3 == 0) ? me * 100 + i / 3 : -7;
  for (int i = 0; i < N; i++) longs[i] = -1;
  shmem_barrier_all();
  shmem_long_iput(longs, strided, 2, 3, N / 2, right);
  shmem_barrier_all();
  for (int i = 0; i < N; i++) {
    long want = (i % 2 == 0) ? left * 100 + i / 2 : -1;
    CHECK(longs[i] == want, "iput longs[%d]=%ld want %ld", i, longs[i], want);
  }
  long gathered[N];
  for (int i = 0; i < N; i++) gathered[i] = -9;
  shmem_long_iget(gathered, longs, 1, 2, N / 2, right);
  for (int i = 0; i < N / 2; i++) CHECK(gathered[i] == me * 100 + i, "iget gathered[%d]=%ld", i, gathered[i]);
  shmem_barrier_all();

  /* _nbi forms complete at quiet; the sized routines move raw elements. */
  int vals[N];
  for (int i = 0; i < N; i++) vals[i] = me + i;
  shmem_int_put_nbi(ints, vals, N, right);
  shmem_quiet();
  shmem_barrier_all();
  for (int i = 0; i < N; i++) CHECK(ints[i] == left + i, "put_nbi ints[%d]=%d", i, ints[i]);
  int fetched[N];
  shmem_int_get_nbi(fetched, ints, N, right);
  shmem_quiet();
  for (int i = 0; i < N; i++) CHECK(fetched[i] == me + i, "get_nbi fetched[%d]=%d", i, fetched[i]);
  shmem_barrier_all();
  uint64_t wide[4] = {me, me + 1, me + 2, me + 3}, wide_back[4];
  shmem_put64(longs, wide, 4, right);
  shmem_barrier_all();
  shmem_get64(wide_back, longs, 4, right);
  for (int i = 0; i < 4; i++) CHECK(wide_back[i] == (uint64_t)(me + i), "put64/get64 [%d]=%lu", i, (unsigned long)wide_back[i]);
  shmem_barrier_all();
  uint32_t narrow[8], narrow_back[8];
  for (int i = 0; i < 8; i++) narrow[i] = 0xabc00000u + me * 8 + i;
  shmem_put32_nbi(ints, narrow, 8, right);
  shmem_barrier_all();
  shmem_get32(narrow_back, ints, 8, me);
  for (int i = 0; i < 8; i++) CHECK(narrow_back[i] == 0xabc00000u + left * 8 + i, "put32 [%d]", i);
  shmem_iput128(longs, wide, 2, 1, 2, right);
  shmem_barrier_all();

  /* C11 generic forms. */
  long one = me + 42;
  shmem_p(&static_longs[0], one, right);
  shmem_barrier_all();
  CHECK(shmem_g(&static_longs[0], me) == left + 42, "generic p/g");
  /* shmem_ptr: the own PE's address; for another PE, NULL or (memory
   * shared) an address whose stores that PE sees after a barrier. */
  CHECK(shmem_ptr(heap, me) == heap, "shmem_ptr own");
  char *direct = shmem_ptr(heap, right);
  if (direct) direct[me * N] = 'A' + me;
  shmem_barrier_all();
  if (shmem_ptr(heap, left)) CHECK(heap[left * N] == 'A' + left, "a store through shmem_ptr");
  if (me == 0 && n > 1) printf("rma: shmem_ptr to another PE: %s\n", direct ? "shared" : "none");
  /* The same for static data: where the data segments are shared, a
   * store through the pointer is that PE's variable. */
  static long static_flag[8];
  long *direct_static = shmem_ptr(&static_flag[me % 8], right);
  if (direct_static) *direct_static = 7000 + me;
  shmem_barrier_all();
  if (shmem_ptr(&static_flag[left % 8], left)) CHECK(static_flag[left % 8] == 7000 + left, "a store through shmem_ptr to static data");
  if (me == 0 && n > 1) printf("rma: shmem_ptr to another PE's static data: %s\n", direct_static ? "shared" : "none");
  CHECK(shmem_addr_accessible(static_longs, right) && !shmem_addr_accessible(mine, right), "addr_accessible");

  shmem_free(ints);
  shmem_free(longs);
  shmem_free(heap);
  shmem_finalize();
  if (me == 0) printf("rma: OK on %d PEs\n", n);
  return 0;
}
