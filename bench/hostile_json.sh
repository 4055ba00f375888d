#!/usr/bin/env bash
# H2 — health probes while clients send the worst JSON bodies (issue #40 F2): S senders each
# post, in a loop, an object of N members that are each an empty object (the shape that was
# quadratic) to /v1/chat/completions; one client probes /v2/health/live every 20 ms over
# fresh connections and reports its latencies. The senders are pre-built bytes written by
# Python (little CPU); the server has its default two I/O threads.
#   bench/hostile_json.sh   (BENCH_SECONDS=20 BENCH_SENDERS=4 BENCH_MEMBERS=1000000)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${BENCH_SECONDS:-20}"
SENDERS="${BENCH_SENDERS:-4}"
MEMBERS="${BENCH_MEMBERS:-1000000}"
source "$ROOT/bench/lib.sh"

PORT="$(free_port)"
printf 'models:\n  - {name: echo, backend: identity}\n' >"$TMP/models.yaml"
"$MMSERVE" serve "$TMP/models.yaml" --port "$PORT" --lock-dir "$TMP/locks" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
wait_ok "http://127.0.0.1:$PORT/v2/health/ready"

/usr/bin/python3 - "$PORT" "$SECS" "$SENDERS" "$MEMBERS" "$SERVER_PID" <<'PY'
import socket, sys, threading, time
port, secs, senders, members, pid = (int(a) for a in sys.argv[1:])
body = ("{" + ",".join('"m%d":{}' % i for i in range(members)) + "}").encode()
request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
stop = time.monotonic() + secs
answered = [0] * senders
parse_s = []

def recv_answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk: return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk: break
        rest += chunk
    return head

def sender(i):
    s = socket.create_connection(("127.0.0.1", port))
    while time.monotonic() < stop:
        t = time.monotonic()
        s.sendall(request)
        head = recv_answer(s)
        assert head.startswith(b"HTTP/1.1 4"), head[:80]
        parse_s.append(time.monotonic() - t)
        answered[i] += 1

threads = [threading.Thread(target=sender, args=(i,)) for i in range(senders)]
for t in threads: t.start()
time.sleep(1)  # every sender has a body in flight
latencies = []
while time.monotonic() < stop:
    t = time.monotonic()
    p = socket.create_connection(("127.0.0.1", port))
    p.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert recv_answer(p).startswith(b"HTTP/1.1 200")
    p.close()
    latencies.append((time.monotonic() - t) * 1000)
    time.sleep(0.02)
for t in threads: t.join()
latencies.sort()
pct = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
rss = int([l for l in open("/proc/%d/status" % pid) if l.startswith("VmHWM")][0].split()[1]) // 1024
print("body: %d members, %.1f MB; %d senders; %d bodies refused (4xx), %.2f s each (median)"
      % (members, len(body) / 1e6, senders, sum(answered), sorted(parse_s)[len(parse_s) // 2]))
print("health probes: %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms; server peak RSS %d MiB"
      % (len(latencies), pct(0.5), pct(0.99), latencies[-1], rss))
PY
stop "$SERVER_PID"
