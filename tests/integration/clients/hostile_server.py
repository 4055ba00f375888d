"""A server that answers mmserve's CLI with hostile strings (hardening round 2, F7).

GET /v2/models/stats: a model list whose names, states and tasks hold terminal escape
sequences and a CR, and whose keep-alive says 1e300 seconds. Any POST: an error of 200 KB
that starts with an escape sequence. Prints "listening on http://127.0.0.1:PORT", as mmserve
does, so the test finds it.
"""
import http.server
import json
import sys


class Hostile(http.server.BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        model = {
            "name": "\x1b]0;pwned\x07evil\r\x1b[2Kechodone",
            "version": "1",
            "mmserve": {"state": "READY\x1b[2J", "task": "embed\u009b31m", "device": 0,
                        "in_flight": 0, "memory": {"resident_bytes": 1048576},
                        "keep_alive": {"seconds": 60, "expires_in_s": 1e300}},
        }
        self.answer(200, {"model_stats": [model]})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        self.answer(400, {"error": "\x1b[2J\rm: loaded\n" + "A" * 200_000})

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Hostile)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
