"""A TCP port on 127.0.0.1 that binds now, for a test's server or rendezvous to bind next.

Taken below Linux's ephemeral range (ip_local_port_range, 32768-60999 by default), where the
outgoing connections of tests running beside the caller take their local ports: a port found
free there by binding port 0 was taken by one of them before the caller's server bound it
(EADDRINUSE, seen with gloo's rendezvous under ctest -j2). A caller that still meets a taken
port may ask again. Run as a script it prints one."""
import random
import socket


def free_port(lo=20000, hi=32000):
    for _ in range(200):
        p = random.randrange(lo, hi)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no free port in %d-%d" % (lo, hi))


if __name__ == "__main__":
    print(free_port())
