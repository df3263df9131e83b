/* Contexts: shmem_ctx_* RMA, atomics and signals on created contexts (on
 * the world and on a team, whose PE numbers they take), ctx_quiet
 * completing that context's puts and landing its fetches, ctx_fence
 * ordering a flag after its data, ctx_get_team, the C11 generic forms
 * with a context first, and destroy. */
#include "check.h"

#define N 64

static long data[N], flag, sum, fetched[4];
static uint64_t sig;

int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
  shmem_ctx_t a, b;
  CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &a) == 0 && a != SHMEM_CTX_INVALID, "ctx_create");
  CHECK(shmem_ctx_create(SHMEM_CTX_SERIALIZED | SHMEM_CTX_NOSTORE, &b) == 0 && b != a, "second ctx");
  shmem_team_t t;
  CHECK(shmem_ctx_get_team(a, &t) == 0 && t == SHMEM_TEAM_WORLD, "a's team is the world");
  CHECK(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &t) == 0 && t == SHMEM_TEAM_WORLD, "default's team");

  /* Puts on a, completed by a's quiet, then a flag on b after a fence. */
  long src[N];
  for (int i = 0; i < N; i++) src[i] = me * 1000 + i;
  shmem_ctx_long_put(a, data, src, N, right);
  shmem_ctx_long_p(a, &data[N - 1], me * 1000 + N - 1, right);
  shmem_ctx_quiet(a);
  shmem_ctx_long_atomic_set(b, &flag, 1, right);
  shmem_ctx_quiet(b);
  shmem_long_wait_until(&flag, SHMEM_CMP_EQ, 1);
  for (int i = 0; i < N; i++)
    CHECK(data[i] == left * 1000 + i, "data[%d] = %ld after the flag", i, data[i]);
  shmem_barrier_all();

  /* Atomics on a context: every PE adds to PE 0; fetching nbi forms
   * land at the context's quiet. */
  shmem_ctx_long_atomic_add(a, &sum, me + 1, 0);
  shmem_ctx_long_atomic_fetch_add_nbi(b, &fetched[0], &sum, 0, 0);
  shmem_ctx_long_atomic_fetch_nbi(b, &fetched[1], &data[0], right);
  shmem_ctx_quiet(a);
  shmem_ctx_quiet(b);
  CHECK(fetched[1] == me * 1000, "fetch_nbi landed at ctx_quiet: %ld", fetched[1]);
  shmem_barrier_all();
  if (me == 0)
    CHECK(sum == (long)n * (n + 1) / 2, "sum %ld", sum);
  /* Gets: blocking and nbi into private memory. */
  long got = shmem_ctx_long_g(a, &data[3], right);
  CHECK(got == me * 1000 + 3, "ctx g %ld", got);
  long priv[2] = {0, 0};
  shmem_ctx_long_get_nbi(b, priv, &data[5], 2, right);
  shmem_ctx_quiet(b);
  CHECK(priv[0] == me * 1000 + 5 && priv[1] == me * 1000 + 6, "ctx get_nbi landed: %ld %ld", priv[0], priv[1]);
  /* put_signal on a context. */
  shmem_ctx_long_put_signal(a, &data[10], src, 1, &sig, 7, SHMEM_SIGNAL_SET, right);
  shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, 7);
  CHECK(data[10] == left * 1000, "put_signal data");
  shmem_barrier_all();

  /* The C11 generic forms, with and without a context. */
  shmem_p(a, &data[20], 42L, right);
  shmem_ctx_quiet(a);
  shmem_atomic_add(b, &sum, 1L, 0);
  shmem_atomic_add(&sum, 1L, 0);
  shmem_quiet();
  shmem_ctx_quiet(b);
  shmem_barrier_all();
  CHECK(data[20] == 42, "generic ctx p");
  if (me == 0)
    CHECK(sum == (long)n * (n + 1) / 2 + 2L * n, "generic adds: %ld", sum);

  /* A context on the even PEs numbers PEs as that team does. */
  shmem_team_t evens;
  shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens);
  if (evens != SHMEM_TEAM_INVALID) {
    shmem_ctx_t c;
    CHECK(shmem_team_create_ctx(evens, 0, &c) == 0, "team_create_ctx");
    CHECK(shmem_ctx_get_team(c, &t) == 0 && t == evens, "c's team");
    int tn = shmem_team_n_pes(evens), tme = shmem_team_my_pe(evens);
    /* Team PE (tme + 1) % tn is world PE 2 * ((tme + 1) % tn). */
    shmem_ctx_long_p(c, &fetched[2], 500 + me, (tme + 1) % tn);
    shmem_ctx_quiet(c);
    shmem_team_sync(evens);
    int from = 2 * ((tme + tn - 1) % tn);
    CHECK(fetched[2] == 500 + from, "team ctx put landed from PE %d: %ld", from, fetched[2]);
    shmem_ctx_destroy(c);
    shmem_team_destroy(evens);
  }
  shmem_barrier_all();
  shmem_ctx_destroy(a);
  shmem_ctx_destroy(b);
  if (me == 0)
    printf("contexts: OK on %d PEs\n", n);
  shmem_finalize();
  return 0;
}
