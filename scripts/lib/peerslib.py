"""Third-party Nostr relays ("peers") for the interop tests and benchmarks, on 127.0.0.1.

Standard library only: scripts/interop/peers is the command line, and the test scripts import this module
(through checks.py) with whichever Python runs them.

  peer         what runs                                                     extra options
  open         nostr-relay 1.14 (PyPI nostr-relay), no auth, no rate limits
  auth         nostr-relay 1.14, NIP-42 required; WRITER_SECRET's key has roles rw
  ratelimit    nostr-relay 1.14, per IP: EVENT 5/s and 100/min, REQ 5/s
  smallframes  nostr-relay 1.14 under plain uvicorn, WebSocket messages up to 65,536 bytes
  local        rust-nostr LocalRelay (nostr-sdk 0.45.1), in memory            PEERS_LOCAL_ARGS
  local-auth   rust-nostr LocalRelay, NIP-42 for reads and writes             PEERS_LOCAL_AUTH_ARGS

PEERS_LOCAL_ARGS replaces the default "--rate 100000:10000000" (which lifts LocalRelay's
60 EVENTs a minute per connection); see scripts/interop/peers_local_relay.py for the options (--lmdb DIR,
--rate, --max-filter-limit, ...). Each peer gets a free port when it starts, unless
PEERS_PORT_<NAME> (e.g. PEERS_PORT_LOCAL_AUTH) or start(port=) names one; its URL is what start()
returns, url(name), and a line PEERS_URL_<NAME>=ws://127.0.0.1:PORT of $PEERS_DIR/peers.env
(running peers only).

Everything lives in $PEERS_DIR (default: .peers in the repository): venv/, conf/ (rendered
nostr-relay configs), data/ (their SQLite files), logs/NAME.log, run/NAME.json (PID, kernel start
time, port, URL), peers.env. A peer runs as the leader of its own session; stop() signals only
the recorded PID when its start time still matches, and the members of its process group that
started after it (gunicorn's worker), never anything found by name.
"""
import base64
import fcntl
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # scripts/ (this file is in scripts/lib)
ROOT = os.path.dirname(SCRIPTS)
PEERS_DIR = os.path.abspath(os.environ.get("PEERS_DIR") or os.path.join(ROOT, ".peers"))
VENV = os.path.join(PEERS_DIR, "venv")
VENV_PYTHON = os.path.join(VENV, "bin", "python")
REQUIREMENTS = os.path.join(SCRIPTS, "interop", "peers-requirements.txt")
LOCAL_RELAY = os.path.join(SCRIPTS, "interop", "peers_local_relay.py")
RUN, LOGS, CONF, DATA = (os.path.join(PEERS_DIR, d) for d in ("run", "logs", "conf", "data"))
ENV_FILE = os.path.join(PEERS_DIR, "peers.env")

NAMES = ("open", "auth", "ratelimit", "smallframes", "local", "local-auth")
NOSTR_RELAYS = ("open", "auth", "ratelimit", "smallframes")
DEFAULT_LOCAL_ARGS = "--rate 100000:10000000"

# TEST-ONLY NIP-42 writer, public by construction: the one key with roles rw on `auth` (any key
# can authenticate on `local-auth`). setup() checks that nostr-sdk derives WRITER_PUBKEY from it.
WRITER_SECRET = hashlib.sha256(b"peers-auth-writer").hexdigest()
WRITER_PUBKEY = "6311c4809c64ff539b72283f34bfb8096f8059a4a16f46d634debb76a580e76c"

START_TIMEOUT = float(os.environ.get("PEERS_START_TIMEOUT", "60"))
STOP_TIMEOUT = float(os.environ.get("PEERS_STOP_TIMEOUT", "20"))
IMPORTS = "nostr_relay, nostr_sdk, websockets, noise, yaml, coincurve"


class PeersError(RuntimeError):
    pass


def say(msg):
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def env_suffix(name):
    return name.upper().replace("-", "_")


def check_names(names):
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise PeersError(f"unknown peer {', '.join(unknown)} (known: {' '.join(NAMES)})")
    return list(dict.fromkeys(names))


# MARK: setup

def _python():
    """(interpreter that makes the venv, its version): PEERS_PYTHON, else the one running this
    (its base interpreter when that is a venv)."""
    python = os.environ.get("PEERS_PYTHON") or getattr(sys, "_base_executable", None) or sys.executable
    if python in (sys.executable, getattr(sys, "_base_executable", None)):
        return python, sys.version.split()[0]
    out = _run([python, "-c", "import sys; print(sys.version.split()[0])"], f"cannot run {python} (PEERS_PYTHON)")
    return python, out.strip()


def _venv_version():
    try:
        with open(os.path.join(VENV, "pyvenv.cfg")) as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return value.strip()
    except OSError:
        pass
    return None


def setup(quiet=False):
    """Creates or updates the venv and returns VENV_PYTHON. A stamp in the venv (hash of the
    requirements file, interpreter version) makes a second run a few file reads; otherwise it
    runs pip install --require-hashes, pip check and an import check."""
    python, version = _python()
    if tuple(int(x) for x in version.split(".")[:2]) < (3, 11):
        raise PeersError(f"{python} is Python {version}: the pinned packages need >= 3.11 (set PEERS_PYTHON)")
    with open(REQUIREMENTS, "rb") as f:
        want = f"requirements-sha256={hashlib.sha256(f.read()).hexdigest()} python={version}\n"
    stamp_file = os.path.join(VENV, ".peers-stamp")
    try:
        with open(stamp_file) as f:
            have = f.read()
    except OSError:
        have = None
    if have == want and os.access(VENV_PYTHON, os.X_OK):
        if not quiet:
            say(f"venv {VENV} is up to date ({want.strip()})")
        return VENV_PYTHON
    t0 = time.monotonic()
    os.makedirs(PEERS_DIR, exist_ok=True)
    if _venv_version() != version or subprocess.run([VENV_PYTHON, "-c", ""], capture_output=True).returncode != 0:
        if os.path.exists(VENV) and not os.path.exists(os.path.join(VENV, "pyvenv.cfg")):
            raise PeersError(f"{VENV} exists and is not a venv")
        say(f"creating venv {VENV} with {python} (Python {version})")
        _run([python, "-m", "venv", "--clear", VENV], "python -m venv failed (Debian: apt-get install python3-venv)")
    say("pip install --require-hashes -r scripts/interop/peers-requirements.txt")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    _run([VENV_PYTHON, "-m", "pip", "install", "--no-input", "--quiet", "--require-hashes", "-r", REQUIREMENTS],
         "pip install failed (PyPI must be reachable; a hash mismatch means wheels of another platform or "
         "Python: see the header of scripts/interop/peers-requirements.txt)", env=env)
    _run([VENV_PYTHON, "-m", "pip", "check"], "pip check reports broken requirements", env=env)
    code = (f"import {IMPORTS}, nostr_sdk as n; "
            f"assert n.Keys.parse({WRITER_SECRET!r}).public_key().to_hex() == {WRITER_PUBKEY!r}")
    _run([VENV_PYTHON, "-c", code], f"the venv cannot import {IMPORTS} (or derives another writer key)")
    with open(stamp_file, "w") as f:
        f.write(want)
    say(f"venv ready in {time.monotonic() - t0:.0f} s: {VENV}")
    return VENV_PYTHON


def _run(cmd, error, env=None):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise PeersError(f"{error}\n{r.stdout[-3000:]}")
    return r.stdout


# MARK: processes

def _stat(pid):
    """(state, pgid, starttime) from /proc/PID/stat, or None when PID does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the command name may hold spaces and ')'
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2]), int(fields[19])


def _alive(pid, starttime):
    s = _stat(pid)
    return s is not None and s[0] != "Z" and s[2] == starttime


def _group(pgid, since, before=None):
    """Live processes of process group `pgid` started at or after `since` (and before `before`)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            s = _stat(entry)
            if s and s[0] != "Z" and s[1] == pgid and s[2] >= since and (before is None or s[2] < before):
                out.append(int(entry))
    return out


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)  # a peer this process started: collect its exit status
    except ChildProcessError:
        pass


def _record_path(name):
    return os.path.join(RUN, f"{name}.json")


def _record(name):
    try:
        with open(_record_path(name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def running(name):
    """The record of a running peer (pid, starttime, port, url, command), else None."""
    rec = _record(name)
    if rec and _alive(rec.get("pid"), rec.get("starttime")):
        return rec
    return None


def url(name):
    rec = running(check_names([name])[0])
    return rec["url"] if rec else None


def status():
    return {name: running(name) for name in NAMES}


@contextmanager
def _lock():
    os.makedirs(RUN, exist_ok=True)
    with open(os.path.join(RUN, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_env():
    lines = ["# scripts/interop/peers: the peers that run now\n"]
    lines += [f"PEERS_URL_{env_suffix(n)}={r['url']}\n" for n, r in status().items() if r]
    tmp = f"{ENV_FILE}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, ENV_FILE)


def free_port():
    """A port nothing is bound to on 127.0.0.1, below the kernel's ephemeral range when there is
    room: a peer restarted on its port while clients reconnect must not find it taken by one of
    their outgoing connections (nor a client connected to itself)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    rng = random.Random()
    for _ in range(100 if low > 12000 else 0):
        port = rng.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_busy(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def handshake(ws_url, timeout=2.0):
    """True when ws_url (ws://host:port) completes a WebSocket opening handshake."""
    host, port = ws_url.removeprefix("ws://").split("/")[0].rsplit(":", 1)
    key = base64.b64encode(os.urandom(16)).decode()
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    return False
                head += chunk
            lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
            ok = lines[0].split()[1:2] == ["101"] and headers.get("sec-websocket-accept") == accept
            if ok:
                mask = os.urandom(4)
                s.sendall(bytes([0x88, 0x82]) + mask + bytes(b ^ mask[i] for i, b in enumerate((1000).to_bytes(2, "big"))))
            return ok
    except (OSError, ValueError, IndexError):
        return False


def _log_tail(name, since=0, lines=25):
    """The last lines `name` logged since byte offset `since` (where its latest start began)."""
    try:
        with open(os.path.join(LOGS, f"{name}.log"), "rb") as f:
            f.seek(since)
            return "".join(f.read().decode(errors="replace").splitlines(True)[-lines:])
    except OSError:
        return ""


# MARK: nostr-relay configs

def _nostr_relay_config(name, port):
    """The config of a nostr-relay peer as JSON (a YAML file to nostr-relay)."""
    db = os.path.join(DATA, f"relay-{name}.sqlite3")
    conf = {
        "relay_name": f"softchat-peers-{name}",
        "relay_description": f"nostr-relay test peer '{name}' (scripts/interop/peers)",
        "storage": {
            "sqlalchemy.url": "sqlite+aiosqlite:///" + db,
            "validators": [f"nostr_relay.validators.{v}" for v in
                           ("is_not_too_large", "is_signed", "is_recent", "is_not_hellthread")],
        },
        "verification": {"nip05_verification": "disabled"},
        # gunicorn master + one uvicorn worker; no gunicorn control socket (one path shared by every
        # relay in $XDG_RUNTIME_DIR otherwise); open WebSockets do not hold a stop for 30 s.
        "gunicorn": {"bind": f"127.0.0.1:{port}", "workers": 1, "loglevel": "warning",
                     "graceful_timeout": 5, "control_socket_disable": True},
        "authentication": {"enabled": False},
        "max_event_size": 4096,  # len(content) in characters
        "oldest_event": 31536000,
        "subscription_limit": 32,
        "max_limit": 6000,
        "logging": {
            "version": 1,
            "handlers": {"console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout"}},
            "root": {"level": "WARNING", "handlers": ["console"]},
            "loggers": {"nostr_relay": {"level": "WARNING", "handlers": ["console"], "propagate": False}},
        },
    }
    if name == "auth":
        # The key is relay_urls; an AUTH event's relay tag must equal one entry exactly.
        hosts = [f"ws://{h}:{port}{s}" for h in ("127.0.0.1", "localhost") for s in ("", "/")]
        conf["authentication"] = {"enabled": True, "relay_urls": hosts, "actions": {"save": "w", "query": "r"},
                                  "throttle": {}}
    elif name == "ratelimit":
        conf["rate_limits"] = {"ip": {"EVENT": "5/s,100/min", "REQ": "5/s"}}
    elif name == "smallframes":
        # `serve --use-uvicorn` hands this section to uvicorn.Config (bind becomes the port).
        conf["gunicorn"] = {"bind": f"127.0.0.1:{port}", "host": "127.0.0.1", "loglevel": "warning",
                            "ws_max_size": 65536, "timeout_graceful_shutdown": 5}
    if any(c in db for c in "?#% "):
        raise PeersError(f"PEERS_DIR must not contain spaces or ?#% (it goes into a database URL): {db}")
    return conf


def _command(name, port, env):
    if name in NOSTR_RELAYS:
        path = os.path.join(CONF, f"relay-{name}.yaml")
        with open(path, "w") as f:
            f.write(f"# rendered by scripts/interop/peers for '{name}' on port {port} (JSON is YAML)\n")
            json.dump(_nostr_relay_config(name, port), f, indent=1)
            f.write("\n")
        cmd = [os.path.join(VENV, "bin", "nostr-relay"), "-c", path, "serve"]
        return cmd + (["--use-uvicorn"] if name == "smallframes" else [])
    if name == "local":
        extra = env.get("PEERS_LOCAL_ARGS", DEFAULT_LOCAL_ARGS)
    else:
        extra = "--nip42 both " + env.get("PEERS_LOCAL_AUTH_ARGS", "")
    return [VENV_PYTHON, LOCAL_RELAY, "--port", str(port), *extra.split()]


# MARK: start / stop

def start(*names, env=None, port=None):
    """Starts the named peers that do not run yet (a running one is left alone, whatever its
    options) and waits until each accepts a WebSocket handshake. `env` overrides os.environ for
    PEERS_LOCAL_ARGS, PEERS_LOCAL_AUTH_ARGS and PEERS_PORT_<NAME>; `port` (one peer only) asks for
    that port, e.g. the one of a peer stopped earlier, so its URL stays the same. Returns the URL,
    or the list of URLs when several names are given. On failure it stops what it started and
    raises PeersError with the log's last lines."""
    names = check_names(names)
    if port is not None and len(names) != 1:
        raise PeersError("start(port=) takes exactly one peer")
    env = dict(os.environ, **(env or {}))
    if not os.access(VENV_PYTHON, os.X_OK):
        raise PeersError(f"no venv at {VENV}: run `python3 scripts/interop/peers setup` first")
    for d in (RUN, LOGS, CONF, DATA):
        os.makedirs(d, exist_ok=True)
    started = []
    with _lock():
        try:
            for name in names:
                if running(name):
                    continue
                forced = env.get(f"PEERS_PORT_{env_suffix(name)}") or "0"
                if not forced.isdigit():
                    raise PeersError(f"PEERS_PORT_{env_suffix(name)} is not a port number: {forced!r}")
                p = port or int(forced)
                if p and port_busy(p):
                    raise PeersError(f"{name}: 127.0.0.1:{p} already accepts connections (another process)")
                p = p or free_port()
                started.append(name)
                _spawn(name, p, _command(name, p, env))
            deadline = time.monotonic() + START_TIMEOUT
            for name in started:
                _wait(name, deadline)
            if "auth" in started:
                out = _run([os.path.join(VENV, "bin", "nostr-relay"), "-c", os.path.join(CONF, "relay-auth.yaml"),
                            "role", "set", "-p", WRITER_PUBKEY, "-r", "rw"], "auth: granting the writer roles rw failed")
                if f"{WRITER_PUBKEY} to rw" not in out:
                    raise PeersError(f"auth: unexpected answer from `nostr-relay role set`: {out}")
        except BaseException:
            _stop(*started)
            write_env()
            raise
        write_env()
    recs = [running(n) for n in names]
    if None in recs:
        raise PeersError(f"exited right after starting: {[n for n, r in zip(names, recs) if r is None]}")
    urls = [r["url"] for r in recs]
    return urls[0] if len(urls) == 1 else urls


def _spawn(name, port, cmd):
    log = os.path.join(LOGS, f"{name}.log")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    with open(log, "ab") as f:
        offset = f.tell()
        f.write(f"\n== {time.strftime('%F %T')} {' '.join(cmd)}\n".encode())
        f.flush()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, cwd=PEERS_DIR,
                             env=env, start_new_session=True)
    s = _stat(p.pid)
    rec = {"pid": p.pid, "starttime": s[2] if s else -1, "port": port, "url": f"ws://127.0.0.1:{port}", "command": cmd,
           "log_offset": offset}
    with open(_record_path(name), "w") as f:
        json.dump(rec, f)


def _wait(name, deadline):
    rec = _record(name)
    while True:
        if not _alive(rec["pid"], rec["starttime"]):
            _reap(rec["pid"])
            raise PeersError(f"{name} exited before accepting connections; {LOGS}/{name}.log ends:\n{_log_tail(name, rec['log_offset'])}")
        if handshake(rec["url"]):
            return
        if time.monotonic() > deadline:
            raise PeersError(f"{name}: no WebSocket handshake on {rec['url']} within {START_TIMEOUT:.0f} s; "
                             f"{LOGS}/{name}.log ends:\n{_log_tail(name, rec['log_offset'])}")
        time.sleep(0.1)


def stop(*names):
    """Stops the named peers (none named: every recorded one); returns the names it stopped."""
    names = check_names(names) if names else [n for n in NAMES if os.path.exists(_record_path(n))]
    with _lock():
        done = _stop(*names)
        if os.path.isdir(RUN):
            write_env()
    return done


def _signal(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _stop(*names):
    """SIGTERM to each recorded PID that is still the process we started (its kernel start time
    matches); then waits until it and the members of its process group started after it have
    exited, SIGKILL after STOP_TIMEOUT. Removes the records; returns the names that had one."""
    groups = {}
    for name in names:
        rec = _record(name)
        if rec is None:
            if os.path.exists(_record_path(name)):
                os.unlink(_record_path(name))  # unreadable: nothing can be signalled safely
            continue
        pid, since = rec["pid"], rec["starttime"]
        now = _stat(pid)
        # A recycled PID belongs to a process started later: nothing from then on is ours.
        before = None if now is None or now[2] == since else now[2]
        groups[name] = (pid, since, before)
        _signal([pid] if _alive(pid, since) else _group(pid, since, before), signal.SIGTERM)
    deadline, killed = time.monotonic() + STOP_TIMEOUT, False
    while True:
        left = {}
        for name, (pid, since, before) in groups.items():
            _reap(pid)
            members = _group(pid, since, before)
            if members:
                left[name] = members
        if not left:
            break
        if time.monotonic() > deadline:
            if killed:
                raise PeersError(f"still running after SIGKILL: {left}")
            say(f"still running after {STOP_TIMEOUT:.0f} s, SIGKILL: {left}")
            _signal([p for members in left.values() for p in members], signal.SIGKILL)
            deadline, killed = time.monotonic() + 10, True
        time.sleep(0.05)
    for name in groups:
        os.unlink(_record_path(name))
    return list(groups)
