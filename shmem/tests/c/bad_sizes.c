/* Sizes, counts and strides a program gets wrong, one case per run
 * (argv[1]): each must end the job with an error that names the call,
 * never wrap into a small block, a wild write or a silent no-op. A case
 * that is not refused prints what it got and exits 3. */
#include <stdint.h>
#include <string.h>
#include "check.h"

static long target[4];

static int is(const char *a, const char *b) { return strcmp(a, b) == 0; }

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes(), next = (me + 1) % n;
  long *heap = shmem_malloc(4 * sizeof(long));
  long src[4] = {1, 2, 3, 4};
  if (is(c, "malloc")) {
    void *a = shmem_malloc(SIZE_MAX - 8);
    void *b = shmem_malloc(64);
    printf("PE %d: shmem_malloc(SIZE_MAX - 8) gave %p, then %p%s\n", me, a, b,
           a == b ? " (the same block)" : "");
  } else if (is(c, "align")) {
    printf("PE %d: shmem_align gave %p\n", me, shmem_align(64, SIZE_MAX));
  } else if (is(c, "realloc")) {
    printf("PE %d: shmem_realloc gave %p\n", me, shmem_realloc(heap, SIZE_MAX - 1));
  } else if (is(c, "calloc")) {
    printf("PE %d: shmem_calloc gave %p\n", me, shmem_calloc(1, SIZE_MAX));
  } else if (is(c, "iput")) {
    /* 3 elements 2^60 apart: 8 * (2 * 2^60 + 1) wraps to 8 bytes. */
    shmem_long_iput(heap, src, (ptrdiff_t)1 << 60, 1, 3, next);
    shmem_quiet();
    printf("PE %d: the wrapping iput was not refused\n", me);
  } else if (is(c, "iget")) {
    long out[4];
    shmem_long_iget(out, heap, 1, (ptrdiff_t)1 << 60, 3, next);
    printf("PE %d: the wrapping iget was not refused\n", me);
  } else if (is(c, "broadcast")) {
    shmem_long_broadcast(SHMEM_TEAM_WORLD, heap, src, SIZE_MAX / 4, 0);
    printf("PE %d: the wrapping broadcast was not refused\n", me);
  } else if (is(c, "fcollect")) {
    shmem_long_fcollect(SHMEM_TEAM_WORLD, heap, src, SIZE_MAX / 16);
    printf("PE %d: the wrapping fcollect was not refused\n", me);
  } else if (is(c, "reduce")) {
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, heap, src, SIZE_MAX / 2);
    printf("PE %d: the wrapping reduction was not refused\n", me);
  } else if (is(c, "reserved")) {
    /* The heap's first bytes are pld's team cells, below the first
     * allocation: not the program's to write. */
    long v = 42;
    if (me == 0) shmem_long_put((long *)((char *)heap - 4096), &v, 1, next);
    shmem_barrier_all();
    printf("PE %d: the put into pld's reserved bytes was not refused\n", me);
  } else {
    shmem_long_put(target, src, 1, next);
    shmem_barrier_all();
    printf("PE %d: no case '%s'\n", me, c);
    return 2;
  }
  return 3;
}
