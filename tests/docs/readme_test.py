#!/usr/bin/env python3
"""The README's quickstart, run as a user would type it: the serve line (on a free port) and
each curl, whose answers must be what the README promises (an embedding, two rerank scores, a
chat reply). A quickstart that drifts from the binary fails here, not on a newcomer's machine."""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def quickstart_commands(readme):
    """The commands of the first ```sh block after '## Quickstart', continuations joined."""
    text = open(readme, encoding="utf-8").read()
    section = text[text.index("## Quickstart"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    commands, current = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
        else:
            current += line
            if current.strip():
                commands.append(current.strip())
            current = ""
    return commands


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, server, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def check_answer(command, answer):
    """What each of the three curls must answer."""
    if "/v1/embeddings" in command:
        vector = answer["data"][0]["embedding"]
        assert len(vector) > 0 and all(isinstance(x, float) for x in vector), answer
    elif "/v1/rerank" in command:
        results = answer["results"]
        assert len(results) == 2, answer
        assert {r["index"] for r in results} == {0, 1}, answer
    elif "/v1/chat/completions" in command:
        message = answer["choices"][0]["message"]
        assert message["role"] == "assistant" and isinstance(message["content"], str), answer
        assert answer["usage"]["completion_tokens"] > 0, answer
    else:
        raise AssertionError(f"the quickstart has a command this test does not know: {command}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    commands = quickstart_commands(os.path.join(args.source, "README.md"))
    serve, curls = commands[0], commands[1:]
    assert serve.startswith("build/src/app/mmserve serve "), serve
    assert len(curls) == 3, curls
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [args.binary] + serve.split()[1:] + [
            "--port", str(port), "--grpc-port", "-1", "--lock-dir", tmp]
        log = open(os.path.join(tmp, "server.log"), "w+")
        server = subprocess.Popen(argv, cwd=args.source, stdout=log, stderr=subprocess.STDOUT)
        try:
            if not wait_ready(port, server):
                log.seek(0)
                sys.exit(f"FAIL: the quickstart's server did not become ready:\n{log.read()}")
            for command in curls:
                command = command.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
                out = subprocess.run(["bash", "-c", command], cwd=args.source,
                                     capture_output=True, text=True, timeout=120)
                assert out.returncode == 0, (command, out.stderr)
                try:
                    answer = json.loads(out.stdout)
                except json.JSONDecodeError:
                    sys.exit(f"FAIL: {command}\nanswered: {out.stdout!r}")
                check_answer(command, answer)
                print(f"ok: {command[:70]}")
        finally:
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=60)
        if code != 0:
            log.seek(0)
            sys.exit(f"FAIL: the server exited {code}:\n{log.read()}")
    print("quickstart: ok")


if __name__ == "__main__":
    main()
