// Two processes exchange 13-byte messages the way a 2-rank barrier does:
// each sends, then busy-polls for the other's, 200 000 times. Mode 0:
// both ways on one loopback TCP connection; mode 1: each way on a
// connection of its own (a barrier signal on its sender's link). The cost
// of a one-way flow: TCP acknowledges it with packets of its own. Without
// pld. Build and run (nstat counts the segments):
//   gcc -O2 -o /tmp/pair-exchange scripts/pair-exchange.c
//   for m in 0 1 0 1; do nstat -n; /tmp/pair-exchange $m; nstat | grep OutSegs; done
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

// A connected loopback pair, Nagle off on both ends.
static void pair(int *a, int *b) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in ad = {0};
    ad.sin_family = AF_INET;
    ad.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t sl = sizeof ad;
    bind(l, (void *)&ad, sizeof ad);
    listen(l, 1);
    getsockname(l, (void *)&ad, &sl);
    *a = socket(AF_INET, SOCK_STREAM, 0);
    connect(*a, (void *)&ad, sizeof ad);
    *b = accept(l, 0, 0);
    setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
}

static void poll_for(int fd, char *buf) {
    while (recv(fd, buf, 13, MSG_DONTWAIT) <= 0) {
    }
}

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 0, n = 200000, warm = 1000;
    int a1, b1, a2, b2;
    char buf[64] = {0};
    pair(&a1, &b1);
    pair(&a2, &b2);
    if (fork() == 0) {
        int rx = b1, tx = mode ? a2 : b1;
        for (int i = 0; i < n + warm; i++) {
            send(tx, buf, 13, 0);
            poll_for(rx, buf);
        }
        exit(0);
    }
    int tx = a1, rx = mode ? b2 : a1;
    double t0 = 0;
    for (int i = 0; i < n + warm; i++) {
        if (i == warm) t0 = now();
        send(tx, buf, 13, 0);
        poll_for(rx, buf);
    }
    printf("mode %d (%s): %.0f ns per exchange\n", mode,
           mode ? "a connection each way" : "one connection both ways", (now() - t0) / n);
    wait(0);
    return 0;
}
