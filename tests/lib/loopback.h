/* loopback.h — TCP sockets on 127.0.0.1 for tests that run their own servers. */
#ifndef PF_TESTS_LOOPBACK_H
#define PF_TESTS_LOOPBACK_H

/* A listening socket on 127.0.0.1 at a free port (*port). The fd, or -errno. */
int test_loopback_listen(int backlog, int *port);
/* A port of 127.0.0.1 nobody listens on (bound once, then closed), or -errno. */
int test_dead_port(void);

#endif
