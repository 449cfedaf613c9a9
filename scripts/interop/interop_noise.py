#!/usr/bin/env python3
"""Noise interop: Softchat's noise:// transport against an independent Noise implementation.

The responder is the Python `noiseprotocol` package (0.3.1, from the peers venv) in front of
the `open` peer relay (nostr-relay, scripts/interop/peers; started here unless it runs): a byte proxy
that completes a Noise_IK_25519_ChaChaPoly_SHA256 (and, in a second round, Noise_XX with the
key pinned) handshake with prologue "softchat-relay/1", then forwards the decrypted bytes to the
relay over plain TCP and the relay's bytes back inside transport messages — 2-byte big-endian
length prefix, at most 65,535 bytes each, for handshake and transport messages alike. The
WebSocket upgrade and frames travel inside the channel untouched.

Per round: `softchat publish` of N signed events and `softchat sync` of them into a second
account, both through noise://127.0.0.1:PORT?pattern=P&key=<the proxy's static public key>;
the client's static key (32 bytes, mode 0600 beside the account database) must be the key the
responder saw (IK). Then a URL pinning another key must be refused with nothing lost.
Prints "interop-noise: N passed, M failed"; exits non-zero on any failure.

Usage (from the repository root; run with the peers venv's python, which has `noise`):
  ./.peers/venv/bin/python scripts/interop/interop_noise.py [SOFTCHAT_BINARY] [--events N]
"""
import hashlib, hmac
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives import serialization
from noise.connection import NoiseConnection, Keypair

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from checks import Tally, peers  # noqa: E402

args = [a for a in sys.argv[1:]]
N = 200
if "--events" in args:
    i = args.index("--events")
    N = int(args[i + 1])
    del args[i:i + 2]
SOFTCHAT = os.path.abspath(args[0] if args else ".build/debug/softchat")
RELAY = None  # ("127.0.0.1", port) of the `open` peer, set by main()
PROLOGUE = b"softchat-relay/1"
MAX_PLAINTEXT = 65535 - 16
tally = Tally("interop-noise", show_passes=True)
check = tally.check


# MARK: the Noise responder proxy (python noiseprotocol)

def recv_exact(sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def recv_frame(sock):
    head = recv_exact(sock, 2)
    if head is None:
        return None
    return recv_exact(sock, int.from_bytes(head, "big"))


def send_frame(sock, data):
    assert len(data) <= 65535
    sock.sendall(len(data).to_bytes(2, "big") + bytes(data))


class NoiseProxy:
    """Noise responder on 127.0.0.1:<port> forwarding plaintext to the relay over TCP."""

    def __init__(self, pattern, private_key):
        self.pattern = pattern
        self.private_key = private_key
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.sessions = 0
        self.failures = []
        self.client_keys = set()
        self.bytes_up = self.bytes_down = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(client,), daemon=True).start()

    def serve(self, client):
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = None
        try:
            noise = NoiseConnection.from_name(f"Noise_{self.pattern}_25519_ChaChaPoly_SHA256".encode())
            noise.set_as_responder()
            noise.set_prologue(PROLOGUE)
            noise.set_keypair_from_private_bytes(Keypair.STATIC, self.private_key)
            noise.start_handshake()
            while not noise.handshake_finished:
                if noise._next_fn == noise.read_message:
                    frame = recv_frame(client)
                    if frame is None:
                        raise ConnectionError("client closed during the handshake")
                    payload = noise.read_message(frame)
                    if payload:
                        raise ValueError("non-empty handshake payload")
                    if not noise.handshake_finished:
                        rs = getattr(noise.noise_protocol.handshake_state, "rs", None)
                        if hasattr(rs, "public_bytes"):  # noiseprotocol's Empty() until known
                            with self.lock:
                                self.client_keys.add(rs.public_bytes.hex())
                else:
                    send_frame(client, noise.write_message(b""))
            with self.lock:
                self.sessions += 1
            upstream = socket.create_connection(RELAY, timeout=10)
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            down = threading.Thread(target=self.relay_to_client, args=(noise, upstream, client), daemon=True)
            down.start()
            while True:
                frame = recv_frame(client)
                if frame is None:
                    break
                plain = noise.decrypt(frame)
                with self.lock:
                    self.bytes_up += len(plain)
                upstream.sendall(plain)
        except Exception as e:  # a refused handshake or a failed decryption ends the session
            with self.lock:
                self.failures.append(f"{type(e).__name__}: {e}")
        finally:
            for s in (client, upstream):
                if s is not None:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()

    def relay_to_client(self, noise, upstream, client):
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                with self.lock:
                    self.bytes_down += len(data)
                for i in range(0, len(data), MAX_PLAINTEXT):
                    send_frame(client, noise.encrypt(bytes(data[i:i + MAX_PLAINTEXT])))
        except OSError:
            pass
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.listener.close()


# MARK: softchat and the peers

def softchat(argv, stdin="", timeout=180):
    return subprocess.run([SOFTCHAT] + argv, input=stdin, capture_output=True, text=True, timeout=timeout)


def last_json(text):
    for line in reversed(text.strip().split("\n")):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def x25519_public(private_key):
    return X25519PrivateKey.from_private_bytes(private_key).public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def run_round(pattern, work):
    private_key = os.urandom(32)
    public_hex = x25519_public(private_key).hex()
    proxy = NoiseProxy(pattern, private_key)
    url = f"noise://127.0.0.1:{proxy.port}?pattern={pattern}&key={public_hex}"
    print(f"== Noise_{pattern}_25519_ChaChaPoly_SHA256 (python noiseprotocol) -> nostr-relay {RELAY[0]}:{RELAY[1]}: {url}")
    key = os.path.join(work, f"{pattern}.key")
    softchat(["keygen", "--out", key])
    tag = f"softchat-noise-{pattern}-{os.urandom(6).hex()}"
    now = int(time.time())
    drafts = [{"kind": 1, "created_at": now - N + i, "tags": [["t", tag]], "content": f"noise interop {i} of {N} \"é\" 🤙"} for i in range(N)]
    r = softchat(["event", "sign", "--key", key], "".join(json.dumps(d) + "\n" for d in drafts))
    check(r.returncode == 0, f"{pattern}: {N} events signed")
    lines = r.stdout.split("\n")[:-1]

    db = os.path.join(work, f"{pattern}-a.db")
    r = softchat(["publish", "--relay", url, "--key", key, "--db", db, "--json", "--timeout", "120"], "\n".join(lines) + "\n")
    final = last_json(r.stdout)
    check(r.returncode == 0 and final.get("done") is True and final.get("accepted") == N,
          f"{pattern}: publish through Noise: {N} accepted (got {final.get('accepted')}, exit {r.returncode}) {r.stderr[-300:]}")

    noise_key = db + ".noise-key"
    ok = os.path.exists(noise_key)
    mode = stat.S_IMODE(os.stat(noise_key).st_mode) if ok else None
    size = os.path.getsize(noise_key) if ok else None
    check(ok and mode == 0o600 and size == 32, f"{pattern}: the client's Noise static key sits beside the account (mode {oct(mode or 0)}, {size} bytes)")
    if pattern == "IK" and ok:
        with open(noise_key, "rb") as f:
            secret = f.read()
        # Each relay is shown a key of its own, derived from the file's secret for its host:port
        # (NoiseKeyPair.forRelay); the file's own key is never shown.
        derived = hmac.new(secret, f"softchat noise static key v1 127.0.0.1:{proxy.port}".encode(), hashlib.sha256).digest()
        client_public = x25519_public(derived).hex()
        check(client_public in proxy.client_keys, f"{pattern}: the responder saw the key derived for it ({client_public[:16]}…)")
        check(x25519_public(secret).hex() not in proxy.client_keys, f"{pattern}: the file's own static key was never shown")

    sdb = os.path.join(work, f"{pattern}-b.db")
    r = softchat(["sync", "--relay", url, "--db", sdb, "--filter", json.dumps({"kinds": [1], "#t": [tag]}), "--json", "--timeout", "120"])
    result = last_json(r.stdout)
    check(result.get("synced") is True and result.get("events") == N,
          f"{pattern}: sync through Noise into a second account: {N} events (got {result}) {r.stderr[-300:]}")

    # Another relay key pinned: every connection is refused, nothing is lost.
    wrong = x25519_public(os.urandom(32)).hex()
    bad_url = f"noise://127.0.0.1:{proxy.port}?pattern={pattern}&key={wrong}"
    bdb = os.path.join(work, f"{pattern}-c.db")
    failures_before = len(proxy.failures)
    r = softchat(["publish", "--relay", bad_url, "--key", key, "--db", bdb, "--json", "--timeout", "4"], lines[0] + "\n")
    final = last_json(r.stdout)
    check(r.returncode == 3 and final.get("done") is False and final.get("accepted") == 0 and final.get("rejected") == 0,
          f"{pattern}: a wrong pinned key is refused, the intent stays non-terminal (exit {r.returncode}, {final})")
    s = softchat(["account", "status", "--db", bdb])
    check(s.returncode == 0, f"{pattern}: that account is still readable ({s.stdout.strip()[:120]})")
    if pattern == "IK":
        check(len(proxy.failures) > failures_before, f"{pattern}: the responder could not decrypt the wrongly keyed handshake ({proxy.failures[-1:]})")
    print(f"  {proxy.sessions} Noise sessions, {proxy.bytes_up} bytes up, {proxy.bytes_down} bytes down")
    proxy.close()


def main():
    if not os.access(SOFTCHAT, os.X_OK):
        raise SystemExit(f"interop-noise: build first (swift build): {SOFTCHAT} missing")
    global RELAY
    url = peers.url("open")
    started = url is None
    if started:
        url = peers.start("open")
    RELAY = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
    work = tempfile.mkdtemp(prefix="softchat-interop-noise-")
    try:
        for pattern in ("IK", "XX"):
            run_round(pattern, work)
    finally:
        if started:
            peers.stop("open")
        subprocess.run(["rm", "-rf", work])
    tally.finish()


if __name__ == "__main__":
    main()
