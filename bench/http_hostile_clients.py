#!/usr/bin/env python3
"""The resident memory of `tessera serve` under hostile clients (issue 36).

Starts the server (stories260K from ../shared), warms it with three normal requests, then sends
REQUESTS hostile requests from 16 client threads, cycling through five kinds: a 7 MiB prompt, a
small request with a huge answer (n = 16, logprobs = 20), a framing attack on a raw socket, a full
request whose client leaves at once, and a half request line left for a second. Prints per kind
the answers' status codes, and the server's resident size (VmRSS) before, at its peak (sampled
every 0.2 s) and 2 s after the end.

Usage: python3 bench/http_hostile_clients.py --binary build/tessera [--requests 1000]
"""
import argparse
import collections
import http.client
import json
import os
import socket
import subprocess
import threading
import time

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "models",
                      "stories260K")
ATTACKS = [
    b"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"GET /health HTTP/1.1\nHost: a\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: a\r\nX: " + b"x" * (100 << 10) + b"\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n",
]
KINDS = ["huge_prompt", "huge_answer", "framing", "disconnect", "slow_close"]


def resident_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def post(port, body, timeout=300):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("POST", "/v1/completions", json.dumps(body),
                       {"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def raw_status(port, data, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            head = sock.recv(64)
        except (socket.timeout, ConnectionError):
            return "timeout"
    parts = head.split(b" ")
    return parts[1].decode() if len(parts) > 1 else "closed"


def hostile(kind, port, index):
    if kind == "huge_prompt":
        return post(port, {"model": "stories", "prompt": "a" * (7 << 20)})
    if kind == "huge_answer":
        return post(port, {"model": "stories", "prompt": "Once", "n": 16, "max_tokens": 64,
                           "logprobs": 20, "ignore_eos": True})
    if kind == "framing":
        return raw_status(port, ATTACKS[index % len(ATTACKS)])
    body = json.dumps({"model": "stories", "prompt": "Once", "max_tokens": 400,
                       "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        if kind == "disconnect":
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: " +
                         str(len(body)).encode() + b"\r\n\r\n" + body)
        else:
            sock.sendall(b"POST /v1/comp")
            time.sleep(1)
    return "left"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--port", type=int, default=18931)
    args = parser.parse_args()
    server = subprocess.Popen(
        [args.binary, "serve", "--model", os.path.join(MODELS, "stories260K.bin"), "--tokenizer",
         os.path.join(MODELS, "tok512.bin"), "--served-model-name", "stories", "--port",
         str(args.port), "--max-waiting-requests", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert "listening" in server.stdout.readline()
        for _ in range(3):
            post(args.port, {"model": "stories", "prompt": "Once", "max_tokens": 16})
        time.sleep(0.5)
        baseline = resident_mib(server.pid)
        peak = [baseline]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], resident_mib(server.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample)
        sampler.start()
        outcomes = collections.defaultdict(collections.Counter)
        next_index = iter(range(args.requests))
        lock = threading.Lock()
        started = time.time()

        def client():
            while True:
                with lock:
                    index = next(next_index, None)
                if index is None:
                    return
                kind = KINDS[index % len(KINDS)]
                try:
                    outcome = hostile(kind, args.port, index // len(KINDS))
                except Exception as error:  # a refused connection counts as an outcome
                    outcome = type(error).__name__
                with lock:
                    outcomes[kind][str(outcome)] += 1

        clients = [threading.Thread(target=client) for _ in range(16)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        elapsed = time.time() - started
        time.sleep(2)
        done.set()
        sampler.join()
        after = resident_mib(server.pid)
        print(f"{args.requests} hostile requests in {elapsed:.1f} s ({args.binary})")
        for kind in KINDS:
            print(f"  {kind:12s} {dict(outcomes[kind])}")
        print(f"resident MiB: before {baseline:.1f}, peak {peak[0]:.1f}, after {after:.1f}")
        print(f"server alive: {server.poll() is None}")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
