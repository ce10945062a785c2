#!/usr/bin/env python3
"""fake_sentinel.py: a sentinel that is behind, for test_sentinel_keygate: it speaks TLS and RESP2 as
a Redis 7.0 sentinel does to keygate, and always names the primary it was started with, at the
config-epoch it was started with (a sentinel on the minority side of a partition, next to the old
primary, answers exactly this). It accepts any AUTH, answers PING, SENTINEL MASTER,
SENTINEL get-master-addr-by-name, SENTINEL REPLICAS (none) and SENTINELS (none), and PSUBSCRIBE
(the confirmations, then silence: it never announces a switch).

    fake_sentinel.py PORT CERT KEY MASTER_NAME HOST MASTER_PORT EPOCH

It prints "ready" once it listens, and runs until it is killed."""

import socket
import ssl
import sys
import threading


def bulk(s):
    b = s.encode() if isinstance(s, str) else s
    return b"$%d\r\n%s\r\n" % (len(b), b)


def array(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


def read_command(f):
    """One RESP2 array of bulk strings from the buffered stream f (None at EOF)."""
    line = f.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.strip().split()  # an inline command
    argv = []
    for _ in range(int(line[1:])):
        n = int(f.readline()[1:])
        argv.append(f.read(n + 2)[:-2])
    return argv


def serve(conn, cfg):
    name, host, mport, epoch = cfg
    f = conn.makefile("rb")
    try:
        while True:
            argv = read_command(f)
            if argv is None:
                return
            cmd = [a.decode(errors="replace").lower() for a in argv]
            if not cmd:
                continue
            if cmd[0] == "auth":
                out = b"+OK\r\n"
            elif cmd[0] == "ping":
                out = b"+PONG\r\n"
            elif cmd[0] == "client":
                out = b"+OK\r\n"
            elif cmd[0] == "sentinel" and len(cmd) >= 3 and cmd[2] != name:
                out = b"-ERR No such master with that name\r\n"
            elif cmd[0] == "sentinel" and cmd[1] == "master":
                fields = ["name", name, "ip", host, "port", str(mport), "runid", "", "flags", "master",
                          "down-after-milliseconds", "1000", "config-epoch", str(epoch), "num-slaves", "0",
                          "num-other-sentinels", "0", "quorum", "2", "failover-timeout", "5000", "parallel-syncs", "2"]
                out = array([bulk(x) for x in fields])
            elif cmd[0] == "sentinel" and cmd[1] == "get-master-addr-by-name":
                out = array([bulk(host), bulk(str(mport))])
            elif cmd[0] == "sentinel" and cmd[1] in ("replicas", "slaves", "sentinels"):
                out = b"*0\r\n"
            elif cmd[0] == "psubscribe":
                out = b"".join(array([bulk("psubscribe"), bulk(p), b":%d\r\n" % (i + 1)])
                               for i, p in enumerate(argv[1:]))
            else:
                out = b"-ERR unknown command\r\n"
            conn.sendall(out)
    except (OSError, ValueError):
        return
    finally:
        conn.close()


def main():
    port, cert, key, name, host, mport, epoch = sys.argv[1:8]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(port)))
    ls.listen(64)
    print("ready", flush=True)
    cfg = (name, host, int(mport), int(epoch))
    while True:
        raw, _ = ls.accept()
        try:
            conn = ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(conn, cfg), daemon=True).start()


if __name__ == "__main__":
    main()
