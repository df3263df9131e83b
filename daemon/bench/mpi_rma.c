/* pld-bench's MPI baseline: MPI one-sided RMA measured the way pld-bench
 * measures pld (daemon/src/bin/pld-bench/measure.rs), so each pld figure
 * has an MPI figure of the same definition beside it.
 *
 *   mpirun -np 2 mpi_rma [--quick] [SIZE ...]   rank 0 drives, rank 1 is the target
 *   mpirun -np P mpi_rma barrier [--quick]      MPI_Barrier at P ranks
 *
 * Passive target throughout (MPI_Win_lock_all once): an op and its
 * completion is the op then MPI_Win_flush, as pld's blocking op is the op
 * and its completion. Output: one "op size value unit" line per figure
 * on rank 0's stdout, the names pld-bench uses:
 *
 *   put_lat, get_lat      MPI_Put / MPI_Get of SIZE bytes, then a flush; us
 *   acc_lat               MPI_Accumulate of SIZE/4 MPI_INT, MPI_SUM, flush; us
 *   fetch_add_lat         MPI_Fetch_and_op of one MPI_LONG, MPI_SUM; us
 *   cas_lat               MPI_Compare_and_swap of one MPI_LONG; us
 *   put_bw, get_bw        a window of ops (64, fewer past 64 MiB), one flush; MB/s
 *   msg_rate, acc_rate    windows of 64 8-byte puts / MPI_LONG accumulates; msg/s
 *   barrier_lat           MPI_Barrier at P ranks (size P); us
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 64 };
/* Bytes in flight in one window, at most (as pld-bench's). */
static const size_t MAX_WINDOW_BYTES = 256u << 20;
/* The largest op accepted; the target window is the largest asked for
 * (every op is at its offset 0). */
static const size_t MAX_SIZE = 128u << 20;

static int quick;

/* Iterations per size, as pld-bench's iters_for. */
static int iters_for(size_t size) {
  int n = size > (4u << 20) ? 20 : size >= (1u << 20) ? 100 : size >= (64u << 10) ? 1000 : 10000;
  if (quick) n = n / 10 > 5 ? n / 10 : 5;
  return n;
}

static int window_for(size_t size) {
  size_t w = MAX_WINDOW_BYTES / (size ? size : 1);
  return w < 1 ? 1 : w > WINDOW ? WINDOW : (int)w;
}

static int bw_iters(size_t size) {
  int n = iters_for(size) / 10, floor = quick ? 3 : 10;
  return n > floor ? n : floor;
}

/* One op and its completion, timed over the size's iterations after a
 * tenth of them as warm-up; prints the mean in us. */
#define LATENCY(NAME, SIZE, OP)                                                  \
  do {                                                                           \
    int iters_ = iters_for(SIZE);                                                \
    double t0_ = 0;                                                              \
    for (int i_ = 0; i_ < iters_ + iters_ / 10; i_++) {                          \
      if (i_ == iters_ / 10) t0_ = MPI_Wtime();                                  \
      OP;                                                                        \
      MPI_Win_flush(1, win);                                                     \
    }                                                                            \
    printf("%s %zu %.3f us\n", NAME, (size_t)(SIZE), (MPI_Wtime() - t0_) * 1e6 / iters_); \
  } while (0)

/* Windows of OP, each closed by a flush, the first one untimed; returns
 * the seconds of the timed ones. */
#define WINDOWS(ITERS, W, OP)                                                    \
  ({                                                                             \
    double t0_ = 0;                                                              \
    for (int i_ = 0; i_ <= (ITERS); i_++) {                                      \
      if (i_ == 1) t0_ = MPI_Wtime();                                            \
      for (int j_ = 0; j_ < (W); j_++) OP;                                       \
      MPI_Win_flush(1, win);                                                     \
    }                                                                            \
    MPI_Wtime() - t0_;                                                           \
  })

static int barrier(void) {
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int iters = quick ? 1000 : 10000;
  for (int i = 0; i < iters / 10; i++) MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_WORLD);
  double us = (MPI_Wtime() - t0) * 1e6 / iters;
  if (rank == 0) printf("barrier_lat %d %.3f us\n", nranks, us);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int barrier_only = 0, nsizes = 0;
  size_t *sizes = calloc((size_t)argc + 1, sizeof *sizes);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "barrier")) barrier_only = 1;
    else {
      char *end;
      unsigned long long v = strtoull(argv[i], &end, 10);
      if (*end || v == 0 || v > MAX_SIZE) {
        fprintf(stderr, "mpi_rma: %s is not a size in bytes from 1 to %zu\n", argv[i], MAX_SIZE);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      sizes[nsizes++] = (size_t)v;
    }
  }
  if (barrier_only) {
    barrier();
    MPI_Finalize();
    return 0;
  }
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (nranks != 2) {
    if (rank == 0) fprintf(stderr, "mpi_rma: the RMA figures need exactly 2 ranks (got %d)\n", nranks);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (nsizes == 0) {
    static const size_t dflt[] = {8, 4096, 1u << 20};
    for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++) sizes[nsizes++] = dflt[i];
  }
  size_t largest = 8;
  for (int i = 0; i < nsizes; i++) largest = sizes[i] > largest ? sizes[i] : largest;
  char *base;
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)largest, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  char *buf = malloc(largest);
  memset(buf, 7, largest);
  long one = 1, result = 0, compare = 0;
  MPI_Win_lock_all(0, win);
  if (rank == 0) {
    for (int s = 0; s < nsizes; s++) {
      size_t n = sizes[s];
      int ints = n / 4 ? (int)(n / 4) : 1;
      LATENCY("put_lat", n, MPI_Put(buf, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win));
      LATENCY("get_lat", n, MPI_Get(buf, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win));
      LATENCY("acc_lat", n, MPI_Accumulate(buf, ints, MPI_INT, 1, 0, ints, MPI_INT, MPI_SUM, win));
    }
    LATENCY("fetch_add_lat", 8, MPI_Fetch_and_op(&one, &result, MPI_LONG, 1, 0, MPI_SUM, win));
    LATENCY("cas_lat", 8, MPI_Compare_and_swap(&one, &compare, &result, MPI_LONG, 1, 0, win));
    for (int s = 0; s < nsizes; s++) {
      size_t n = sizes[s];
      int w = window_for(n), iters = bw_iters(n);
      double put = WINDOWS(iters, w, MPI_Put(buf, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win));
      printf("put_bw %zu %.1f MB/s\n", n, (double)n * w * iters / put / 1e6);
      double get = WINDOWS(iters, w, MPI_Get(buf, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win));
      printf("get_bw %zu %.1f MB/s\n", n, (double)n * w * iters / get / 1e6);
    }
    int iters = quick ? 100 : 1000;
    double put = WINDOWS(iters, WINDOW, MPI_Put(buf, 8, MPI_BYTE, 1, 0, 8, MPI_BYTE, win));
    printf("msg_rate 8 %.0f msg/s\n", (double)WINDOW * iters / put);
    double acc = WINDOWS(iters, WINDOW, MPI_Accumulate(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, MPI_SUM, win));
    printf("acc_rate 8 %.0f msg/s\n", (double)WINDOW * iters / acc);
    fflush(stdout);
  }
  MPI_Win_unlock_all(win);
  /* The target serves until the driver is done. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&win);
  free(buf);
  free(sizes);
  MPI_Finalize();
  return 0;
}
