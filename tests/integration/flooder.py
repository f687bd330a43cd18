"""A connection flood: ``python flooder.py HOST PORT SECONDS RATE CA_FILE``.

One thread opens TCP connections to HOST:PORT at RATE per second (as fast as it can, if
slower) and sends nothing on them, holding the last 2,000 open; another runs TLS handshakes
without a client certificate (trusting CA_FILE) back to back. Prints what it opened.
"""

import collections
import socket
import ssl
import sys
import threading
import time

HOST, PORT = sys.argv[1], int(sys.argv[2])
SECONDS, RATE, CA = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
STOP = time.monotonic() + SECONDS
COUNTS: collections.Counter[str] = collections.Counter()


def anonymous() -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(CA)
    while time.monotonic() < STOP:
        try:
            with (
                socket.create_connection((HOST, PORT), timeout=1.0) as raw,
                context.wrap_socket(raw),
            ):
                COUNTS["tls"] += 1
        except (OSError, ssl.SSLError):
            COUNTS["tls_failed"] += 1


def idle() -> None:
    held: collections.deque[socket.socket] = collections.deque()
    started = time.monotonic()
    opened = 0
    while time.monotonic() < STOP:
        ahead = opened / RATE - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
        opened += 1
        try:
            held.append(socket.create_connection((HOST, PORT), timeout=1.0))
            COUNTS["idle"] += 1
        except OSError:
            COUNTS["idle_failed"] += 1
        while len(held) > 2000:
            held.popleft().close()


threads = [threading.Thread(target=idle), threading.Thread(target=anonymous)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(dict(COUNTS), flush=True)
