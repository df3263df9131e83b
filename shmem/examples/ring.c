/* Ring shift: each PE puts its array into its right neighbour's symmetric
 * array, then checks that it holds its left neighbour's.
 *   pld-oshcc ring.c -o ring && pld-oshrun -np 4 ./ring */
#include <stdio.h>
#include <shmem.h>

#define N 1024

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  long *src = shmem_malloc(N * sizeof(long));
  long *dst = shmem_malloc(N * sizeof(long));
  for (int i = 0; i < N; i++) src[i] = me * N + i;
  shmem_barrier_all();
  shmem_long_put(dst, src, N, (me + 1) % n);
  shmem_barrier_all();
  int left = (me + n - 1) % n, bad = 0;
  for (int i = 0; i < N; i++) bad += dst[i] != left * N + i;
  printf("PE %d: received %d longs from PE %d: %s\n", me, N, left, bad ? "WRONG" : "OK");
  shmem_free(dst);
  shmem_free(src);
  shmem_finalize();
  return bad != 0;
}
