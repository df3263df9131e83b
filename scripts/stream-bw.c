// Loopback TCP stream of 2 GiB from a sender buffer of N MiB into a
// receiver buffer of N MiB, blocking send/recv of at most K KiB each: the
// cache effect of a 1 MiB against a 64 MiB buffer, without pld.
// Build and run: gcc -O2 -o /tmp/stream-bw scripts/stream-bw.c
//                for n in 1 4 16 64; do /tmp/stream-bw $n 1024; done
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <sys/wait.h>
int main(int argc,char**argv){ size_t N=(size_t)atoi(argv[1])<<20, TOTAL=(size_t)2048<<20; size_t W=atoi(argv[2])<<10;
 int s=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={0}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(0x7f000001);
 bind(s,(void*)&a,sizeof a); listen(s,1); socklen_t l=sizeof a; getsockname(s,(void*)&a,&l);
 if(fork()==0){ int c=accept(s,0,0); char*buf=malloc(N); memset(buf,0,N); size_t got=0;
   while(got<TOTAL){ size_t off=got%N; size_t k=N-off; if(k>W)k=W; ssize_t r=recv(c,buf+off,k,0); if(r<=0)exit(1); got+=r;} send(c,"x",1,0); exit(0);}
 int c=socket(AF_INET,SOCK_STREAM,0); connect(c,(void*)&a,sizeof a); char*src=malloc(N); memset(src,5,N);
 struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0); size_t sent=0;
 while(sent<TOTAL){ size_t off=sent%N; size_t k=N-off; if(k>W)k=W; ssize_t r=send(c,src+off,k,0); if(r<=0)exit(2); sent+=r;}
 char x; recv(c,&x,1,0); clock_gettime(CLOCK_MONOTONIC,&t1); double dt=(t1.tv_sec-t0.tv_sec)+(t1.tv_nsec-t0.tv_nsec)/1e9;
 printf("buf %zu MiB, io %zu KiB: %.0f MB/s\n",N>>20,W>>10,TOTAL/dt/1e6); wait(0); return 0;}
