"""What the check and interop scripts share: the pass/fail tally (each check prints its
failures and, verbosely, its passes; the summary line "NAME: N passed, M failed" ends the run
with exit status 1 if anything failed), running the softchat binary, and the peers kit in
../shared/peers."""
import json
import os
import subprocess
import sys

PEERS_KIT = os.path.abspath("../shared/peers")
PEERS_DIR = os.path.abspath(os.environ.get("PEERS_DIR", ".peers"))


def peers(script, *names, env=None):
    """Runs a peers-kit script (start.sh, stop.sh, …) for the named relays; exits on failure."""
    e = dict(os.environ, PEERS_DIR=PEERS_DIR, **(env or {}))
    r = subprocess.run(["bash", f"{PEERS_KIT}/{script}", *names], capture_output=True, text=True, env=e)
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        raise SystemExit(f"peers {script} {names} failed")


def run_softchat(binary, args, stdin="", timeout=180):
    return subprocess.run([binary] + args, input=stdin, capture_output=True, text=True, timeout=timeout)


def sign_events(binary, key, drafts):
    """`softchat event sign --key KEY` over the drafts: the signed event lines."""
    r = run_softchat(binary, ["event", "sign", "--key", key], "".join(json.dumps(d) + "\n" for d in drafts))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split("\n")[:-1]


class Tally:
    def __init__(self, name, show_passes=False):
        self.name = name
        self.show_passes = show_passes
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            if self.show_passes:
                print(f"  ok: {what}")
        else:
            self.failed += 1
            print(f"  FAIL: {what}" if self.show_passes else f"{self.name}: FAIL: {what}", file=sys.stderr)
        return ok

    def finish(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)
