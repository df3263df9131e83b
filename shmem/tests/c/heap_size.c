/* SHMEM_SYMMETRIC_SIZE bounds the heap: run with it set to argv[1] MiB.
 * Half of it is allocated and used across PEs; the whole of it does not
 * fit (pld keeps the first 1 MiB + 64 KiB), so malloc, calloc and
 * realloc return NULL on every PE (1.5, 9.3) and realloc leaves its block
 * as it was; freed, three quarters fit. */
#include <stdint.h>
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 0;
  CHECK(mib >= 8, "give the heap size in MiB, at least 8");
  size_t size = mib << 20;
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes(), next = (me + 1) % n;

  long *a = shmem_malloc(size / 2);
  CHECK(a != NULL, "half the heap (%zu bytes) did not fit", size / 2);
  size_t count = size / 2 / sizeof(long);
  long *mine = malloc(size / 2);
  for (size_t i = 0; i < count; i++) mine[i] = (long)(me * count + i);
  shmem_long_put(a, mine, count, next);
  shmem_barrier_all();
  int prev = (me + n - 1) % n;
  for (size_t i = 0; i < count; i += 4093)
    CHECK(a[i] == (long)(prev * count + i), "a[%zu] = %ld", i, a[i]);
  CHECK(a[count - 1] == (long)(prev * count + count - 1), "the last element");

  CHECK(shmem_malloc(size) == NULL, "the whole heap was allocated beside half of it");
  CHECK(shmem_calloc(1, size) == NULL, "calloc of the whole heap");
  CHECK(shmem_realloc(a, size) == NULL, "realloc to the whole heap");
  CHECK(a[count - 1] == (long)(prev * count + count - 1), "the failed realloc changed its block");

  shmem_free(a);
  long *b = shmem_malloc(size / 4 * 3);
  CHECK(b != NULL, "three quarters of the heap did not fit once half was freed");
  b[size / 4 * 3 / sizeof(long) - 1] = 7;
  shmem_free(b);
  shmem_barrier_all();
  if (me == 0) printf("heap_size: OK on %d PEs\n", n);
  free(mine);
  shmem_finalize();
  return 0;
}
