#!/usr/bin/env python3
"""top_fake_server.py PORTFILE — a hostile metrics endpoint for `trainprof top` (top_test.sh).

Listens on an ephemeral loopback port (written to PORTFILE), and answers connection k with
response k mod len(RESPONSES): hostile and malformed Prometheus text, binary junk, an
oversized body, a truncated or lying Content-Length, bad chunking, a status other than 200,
an immediate close, and a slow answer that outlasts top's timeout. Runs until killed.
"""
import socket
import sys
import threading
import time

HOSTILE = (
    b"# HELP trainprof_steps_total \x1b[2J\x1b[31mred\n"
    b"# TYPE trainprof_steps_total counter\n"
    b"trainprof_steps_total{rank=\"\x1b]0;pwned\x07\\\"7\\\\\"} 12\n"
    b"trainprof_step_number{rank=\"0\"} NaN\n"
    b"trainprof_step_last_duration_seconds +Inf\n"
    b"trainprof_step_duration_seconds_sum -Inf\n"
    b"trainprof_step_duration_seconds_count 1e308\n"
    b"trainprof_tokens_total 1e999\n"
    b"trainprof_gpu_power_watts{gpu=\"" + b"9" * 300 + b"\"} 1\n"
    + b"".join(b"trainprof_gpu_utilization_ratio{gpu=\"%d\"} 0.5\n" % k for k in range(200))
    + b"trainprof_gpu_memory_used_bytes{gpu=\"\xff\xfe\"} -5\n"
    b"m{a=\"unterminated\n"
    b"{{{{}}}} 1\n"
    b"\x00\x00\x00 1\n"
    b"m{" + b"l=\"v\"," * 5000 + b"} 1\n"
    + b"x" * 100000 + b" 1\n"
    b"trainprof_steps_total 1 2 3 4\n"
)


def resp(body, status=b"200 OK", extra=b""):
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\n" + extra
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


RESPONSES = [
    resp(HOSTILE),
    b"\x00\xff garbage, not HTTP at all\r\n\r\n",
    resp(b"m 1\n" * 10, extra=b"X: y\r\n").replace(b"Content-Length: 40", b"Content-Length: 4000"),
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffffff\r\nab",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nm 1\n\r\n-3\r\n",
    resp(b"forbidden\n", status=b"403 Forbidden"),
    "close",
    "slow",
    "huge",
    b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 200000 + b"\r\n",  # headers never end
    resp(HOSTILE.replace(b"\n", b"\r\n")),
]


def serve(conn, k):
    try:
        conn.settimeout(10)
        try:
            conn.recv(4096)
        except OSError:
            pass
        r = RESPONSES[k % len(RESPONSES)]
        if r == "close":
            pass
        elif r == "slow":
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            time.sleep(6)
        elif r == "huge":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
            chunk = b"trainprof_steps_total 1\n" * 4096
            for _ in range(1000):  # 100 MB, more than top reads
                conn.sendall(chunk)
        else:
            conn.sendall(r)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    k = 0
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, k), daemon=True).start()
        k += 1


if __name__ == "__main__":
    main()
