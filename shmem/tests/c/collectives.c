/* Every collective of the 1.5 team API, for every type the header lists,
 * over three team shapes — the world, the even PEs (a strided subteam)
 * and this PE's row of a 2-D split — and the reductions in place and not.
 * Each result is checked against its definition, written out here. */
#include <string.h>
#include "check.h"

#define N 5 /* elements per PE */
#define MAXPES 16

static int me, npes;
/* Symmetric buffers, allocated once by every PE (shmem_malloc is
 * collective over the world, so not inside a subteam's tests). */
static void *bufa, *bufb;
#define BUF (sizeof(long double _Complex) * N * MAXPES * 4)

/* The team shapes: their handles here (SHMEM_TEAM_INVALID where this PE
 * is not a member), names and members as world PEs. */
static shmem_team_t shapes[3];
static const char *shape_names[3] = {"world", "evens", "2-D row"};

static int world_pe(shmem_team_t t, int i) { return shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD); }

/* A value of PE p's element i, small enough for every type. */
#define V(p, i) (((p) * 3 + (i)) % 11 + 1)

#define MOVES(T, NAME)                                                                  \
  static void moves_##NAME(shmem_team_t t, const char *shape) {                         \
    int tn = shmem_team_n_pes(t), tme = shmem_team_my_pe(t);                            \
    T *src = bufa, *dst = bufb;                                                         \
    /* broadcast from every root */                                                     \
    for (int root = 0; root < tn; root++) {                                             \
      for (int i = 0; i < N; i++) { src[i] = (T)V(me, i); dst[i] = (T)0; }              \
      shmem_team_sync(t); /* every dest ready before any member calls (the spec) */     \
      CHECK(shmem_##NAME##_broadcast(t, dst, src, N, root) == 0, "broadcast");          \
      for (int i = 0; i < N; i++)                                                       \
        CHECK(dst[i] == (T)V(world_pe(t, root), i), #NAME " broadcast %s root %d [%d]", shape, root, i); \
    }                                                                                   \
    /* fcollect: the others may still read dst */                                       \
    shmem_team_sync(t);                                                                 \
    for (int i = 0; i < N; i++) src[i] = (T)V(me, i);                                   \
    CHECK(shmem_##NAME##_fcollect(t, dst, src, N) == 0, "fcollect");                    \
    for (int j = 0; j < tn; j++)                                                        \
      for (int i = 0; i < N; i++)                                                       \
        CHECK(dst[j * N + i] == (T)V(world_pe(t, j), i), #NAME " fcollect %s [%d][%d]", shape, j, i); \
    /* collect: member j gives j % 3 + 1 elements */                                    \
    CHECK(shmem_##NAME##_collect(t, dst, src, (size_t)(tme % 3 + 1)) == 0, "collect");  \
    {                                                                                   \
      int at = 0;                                                                       \
      for (int j = 0; j < tn; j++)                                                      \
        for (int i = 0; i < j % 3 + 1; i++, at++)                                       \
          CHECK(dst[at] == (T)V(world_pe(t, j), i), #NAME " collect %s from %d [%d]", shape, j, i); \
    }                                                                                   \
    /* alltoall: block j of member k's source is V(k, j * N + i) */                     \
    shmem_team_sync(t);                                                                 \
    for (int j = 0; j < tn; j++)                                                        \
      for (int i = 0; i < N; i++) src[j * N + i] = (T)V(me, j * N + i);                 \
    CHECK(shmem_##NAME##_alltoall(t, dst, src, N) == 0, "alltoall");                    \
    for (int k = 0; k < tn; k++)                                                        \
      for (int i = 0; i < N; i++)                                                       \
        CHECK(dst[k * N + i] == (T)V(world_pe(t, k), tme * N + i), #NAME " alltoall %s from %d [%d]", shape, k, i); \
    /* alltoalls: source stride 2, dest stride 3, 2 elements per member */              \
    for (int i = 0; i < N * MAXPES; i++) { src[i] = (T)V(me, i); }                      \
    memset(dst, 0, sizeof(T) * N * MAXPES);                                             \
    shmem_team_sync(t);                                                                 \
    if (3 * 2 * tn <= N * MAXPES) {                                                     \
      CHECK(shmem_##NAME##_alltoalls(t, dst, src, 3, 2, 2) == 0, "alltoalls");          \
      for (int k = 0; k < tn; k++)                                                      \
        for (int i = 0; i < 2; i++)                                                     \
          CHECK(dst[(k * 2 + i) * 3] == (T)V(world_pe(t, k), (tme * 2 + i) * 2), #NAME " alltoalls %s from %d [%d]", shape, k, i); \
    }                                                                                   \
  }
PLD_SHMEM_RMA_BASE_TYPES(MOVES)
PLD_SHMEM_RMA_ALIAS_TYPES(MOVES)

/* Reductions: each op's definition over the members' values. */
#define RED_VAL(op, p, i) (op == 's' ? ((p) + (i)) % 5 + 1 : op == 'p' ? ((p) == (i) % tn ? 2 : 1) \
                           : op == 'b' ? (1 << (((p) + (i)) % 7)) | 1 : ((p) * 3 + (i)) % 11)
#define REDUCE_ONE(T, NAME, OPNAME, KIND, COMBINE)                                      \
  for (int inplace = 0; inplace < 2; inplace++) {                                       \
    for (int i = 0; i < N; i++) src[i] = (T)RED_VAL(KIND, world_pe(t, tme), i);         \
    T *out = inplace ? src : dst;                                                       \
    CHECK(shmem_##NAME##_##OPNAME##_reduce(t, out, src, N) == 0, #OPNAME);              \
    for (int i = 0; i < N; i++) {                                                       \
      T want = (T)RED_VAL(KIND, world_pe(t, 0), i);                                     \
      for (int j = 1; j < tn; j++) {                                                    \
        T x = want, y = (T)RED_VAL(KIND, world_pe(t, j), i);                            \
        want = (T)(COMBINE);                                                            \
      }                                                                                 \
      CHECK(out[i] == want, #NAME " " #OPNAME "_reduce %s%s [%d]", shape, inplace ? " in place" : "", i); \
    }                                                                                   \
  }
#define ARITH(T, NAME)                                                                  \
  static void arith_##NAME(shmem_team_t t, const char *shape) {                         \
    int tn = shmem_team_n_pes(t), tme = shmem_team_my_pe(t);                            \
    T *src = bufa, *dst = bufb;                                                         \
    REDUCE_ONE(T, NAME, sum, 's', x + y)                                                \
    REDUCE_ONE(T, NAME, prod, 'p', x * y)                                               \
    REDUCE_ONE(T, NAME, max, 'm', x > y ? x : y)                                        \
    REDUCE_ONE(T, NAME, min, 'm', x < y ? x : y)                                        \
  }
#define BITS(T, NAME)                                                                   \
  static void bits_##NAME(shmem_team_t t, const char *shape) {                          \
    int tn = shmem_team_n_pes(t), tme = shmem_team_my_pe(t);                            \
    T *src = bufa, *dst = bufb;                                                         \
    REDUCE_ONE(T, NAME, and, 'b', x & y)                                                \
    REDUCE_ONE(T, NAME, or, 'b', x | y)                                                 \
    REDUCE_ONE(T, NAME, xor, 'b', x ^ y)                                                \
  }
PLD_SHMEM_REDUCE_ARITH_TYPES(ARITH)
PLD_SHMEM_REDUCE_BIT_TYPES(BITS)
ARITH(long double, longdouble)

/* The complex types: sum and prod. */
#define COMPLEX(T, NAME)                                                                \
  static void complex_##NAME(shmem_team_t t, const char *shape) {                       \
    int tn = shmem_team_n_pes(t), tme = shmem_team_my_pe(t);                            \
    T *src = bufa, *dst = bufb;                                                         \
    REDUCE_ONE(T, NAME, sum, 's', x + y)                                                \
    REDUCE_ONE(T, NAME, prod, 'p', x * y)                                               \
  }
COMPLEX(float _Complex, complexf)
COMPLEX(double _Complex, complexd)

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  npes = shmem_n_pes();
  CHECK(npes <= MAXPES, "at most %d PEs", MAXPES);
  bufa = shmem_malloc(BUF);
  bufb = shmem_malloc(BUF);
  CHECK(bufa && bufb, "shmem_malloc");
  shapes[0] = SHMEM_TEAM_WORLD;
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &shapes[1]) == 0, "evens");
  shmem_team_t column;
  CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &shapes[2], NULL, 0, &column) == 0, "2-D");
  for (int s = 0; s < 3; s++) {
    shmem_team_t t = shapes[s];
    if (t == SHMEM_TEAM_INVALID)
      continue;
    const char *shape = shape_names[s];
#define RUN_MOVES(T, NAME) moves_##NAME(t, shape);
#define RUN_ARITH(T, NAME) arith_##NAME(t, shape);
#define RUN_BITS(T, NAME) bits_##NAME(t, shape);
    PLD_SHMEM_RMA_BASE_TYPES(RUN_MOVES)
    PLD_SHMEM_RMA_ALIAS_TYPES(RUN_MOVES)
    PLD_SHMEM_REDUCE_ARITH_TYPES(RUN_ARITH)
    PLD_SHMEM_REDUCE_BIT_TYPES(RUN_BITS)
    arith_longdouble(t, shape);
    complex_complexf(t, shape);
    complex_complexd(t, shape);
    /* The untyped forms. A collective writes into the others' dest: each
     * waits until they have read it (the specification has every dest
     * ready before any member calls). */
    char *a = bufa, *b = bufb;
    int tn = shmem_team_n_pes(t);
    memset(a, 'a' + me % 26, 64 * MAXPES);
    shmem_team_sync(t); /* the others have read b */
    CHECK(shmem_fcollectmem(t, b, a, 7) == 0, "fcollectmem");
    for (int j = 0; j < tn; j++)
      CHECK(b[j * 7 + 6] == 'a' + world_pe(t, j) % 26, "fcollectmem %s [%d]", shape, j);
    shmem_team_sync(t); /* the others have read b */
    CHECK(shmem_broadcastmem(t, b, a, 9, tn - 1) == 0, "broadcastmem");
    CHECK(b[8] == 'a' + world_pe(t, tn - 1) % 26, "broadcastmem %s", shape);
    shmem_team_sync(t); /* the others have read b */
    CHECK(shmem_collectmem(t, b, a, 3) == 0 && b[3 * tn - 1] == 'a' + world_pe(t, tn - 1) % 26, "collectmem %s", shape);
    shmem_team_sync(t); /* the others have read b */
    CHECK(shmem_alltoallmem(t, b, a, 5) == 0 && b[5 * tn - 1] == 'a' + world_pe(t, tn - 1) % 26, "alltoallmem %s", shape);
    shmem_team_sync(t); /* the others have read b */
    CHECK(shmem_alltoallsmem(t, b, a, 2, 1, 5) == 0 && b[2 * (5 * tn - 1)] == 'a' + world_pe(t, tn - 1) % 26, "alltoallsmem %s", shape);
  }
  /* The C11 generic forms pick the typed calls. */
  long *ls = bufa, *ld = bufb;
  ls[0] = me + 1;
  CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, ld, ls, 1) == 0 && ld[0] == (long)npes * (npes + 1) / 2, "generic sum_reduce %ld", ld[0]);
  shmem_sync_all();
  CHECK(shmem_fcollect(SHMEM_TEAM_WORLD, ld, ls, 1) == 0 && ld[npes - 1] == npes, "generic fcollect");
  shmem_barrier_all();
  if (me == 0)
    printf("collectives: OK on %d PEs\n", npes);
  shmem_finalize();
  return 0;
}
