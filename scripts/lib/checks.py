"""What the check and interop scripts share: the pass/fail tally (each check prints its
failures and, verbosely, its passes; the summary line "NAME: N passed, M failed" ends the run
with exit status 1 if anything failed), running the softchat binary, the third-party relays
(`peers`: scripts/lib/peerslib.py, e.g. peers.start("local") -> its URL, peers.stop("local")),
building the TypeScript facade's Node-API addon, and the docs' code blocks."""
import glob
import json
import os
import re
import subprocess
import sys

import peerslib as peers  # noqa: F401  (re-exported: `from checks import peers`)


NODE_INCLUDE = "/usr/include/node"
# Debian's JNA and Kotlin standard library: what the Kotlin facade compiles and runs against.
JNA = "/usr/share/java/jna.jar"
KOTLIN_STDLIB = "/usr/share/java/kotlin-stdlib.jar"
# npm with no network chatter: no update notice, funding message or audit request.
NPM_QUIET = {"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}


def npm_project(folder, name, tarball, env=None):
    """A fresh ES-module project in `folder` (created) with the package `tarball` installed
    offline, as an app team's first `npm install` makes it; returns npm's CompletedProcess."""
    os.makedirs(folder, exist_ok=True)
    json.dump({"name": name, "version": "1.0.0", "private": True, "type": "module"}, open(os.path.join(folder, "package.json"), "w"))
    return subprocess.run(["npm", "install", "--offline", "--no-package-lock", tarball], cwd=folder, capture_output=True, text=True,
                          env=dict(env if env is not None else os.environ, **NPM_QUIET))


def node_addon_command(root, libdir, output, flags=()):
    """The gcc command that builds the Node-API addon of the checkout at `root`
    (generated/typescript/native/softchat_addon.c) into `output`, linked to the libSoftchatFFI in
    `libdir` (found there at run time too)."""
    return ["gcc", "-shared", "-fPIC", *flags, f"-I{NODE_INCLUDE}", f"-I{os.path.join(root, 'generated/c')}",
            os.path.join(root, "generated/typescript/native/softchat_addon.c"), f"-L{libdir}", "-lSoftchatFFI",
            f"-Wl,-rpath,{libdir}", "-o", output]


# The names the guides' Kotlin samples take from an Android app, as parameters of the function each
# sample becomes (the app's Context only for its filesDir): test-facades compiles the samples so,
# and test-install runs them so.
KOTLIN_SAMPLE_STANDINS = """class AndroidContext(val filesDir: java.io.File)
"""
KOTLIN_SAMPLE_PARAMETERS = ("context: AndroidContext, me: String, identity: SoftchatIdentity, draft: UnsignedEvent, now: Long, "
                            "render: (ManagedTransportStateChange) -> Unit, log: (ManagedTransportActivity) -> Unit")


# The names the guides' Rust samples take from the app, as parameters of the function each sample
# becomes: test-facades compiles the samples so, and test-install runs them so.
RUST_SAMPLE_PARAMETERS = ("account: &SoftchatAccount, identity: &SoftchatIdentity, draft: &UnsignedEvent, now: i64, me: &str, "
                          "frame: &str")


def rust_guide_sample_functions(root):
    """Each ```rust sample of the guides of the checkout at `root` as `fn guide_sample_N(…) ->
    Result<(), SoftchatError>`: returns ([(where, function name)], the Rust source lines)."""
    guides = sorted(f"docs/guides/{name}" for name in os.listdir(os.path.join(root, "docs/guides")) if name.endswith(".md"))
    samples, lines = [], []
    for i, (where, line, _, code) in enumerate(code_blocks(root, guides, ["rust"]), 1):
        samples.append((f"{where}:{line}", f"guide_sample_{i}"))
        lines += [f"// {where}:{line}", f"fn guide_sample_{i}({RUST_SAMPLE_PARAMETERS}) -> Result<(), SoftchatError> {{"]
        lines += ["    " + l if l else "" for l in code.split("\n")] + ["    Ok(())", "}", ""]
    return samples, lines


def facade_sources(root):
    """The TypeScript facade's sources (generated/typescript/*.ts) of the checkout at `root`, sorted,
    but browser.ts: the browser build's entry is an ES module only (it finds softchat.wasm through
    import.meta.url), which scripts/build/build-wasm compiles."""
    directory = os.path.join(root, "generated/typescript")
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".ts") and f != "browser.ts")


def code_blocks(root, paths, languages):
    """(path, line, language, code) for each fenced block whose language is in `languages`, in the
    Markdown files `paths` (relative to `root`), in order: `line` is the code's first line in the
    file, and the fence's indentation is removed from the code."""
    fence = re.compile(r"^( *)```(" + "|".join(map(re.escape, languages)) + r")\n(.*?)^\1```", re.M | re.S)
    for path in paths:
        text = open(os.path.join(root, path), encoding="utf-8").read()
        for m in fence.finditer(text):
            indent = len(m.group(1))
            code = "\n".join(line[indent:] for line in m.group(3).rstrip("\n").split("\n"))
            yield path, text.count("\n", 0, m.start()) + 2, m.group(2), code


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


def canonical_replay_line(value):
    """A replay output line in one form across the bindings: null members dropped (`softchat
    replay` omits an absent optional field, the bindings' ABI form writes null) and an event's
    creation time under NIP-01's name."""
    if isinstance(value, dict):
        return {("created_at" if k == "createdAt" else k): canonical_replay_line(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [canonical_replay_line(v) for v in value]
    return value


def replay_differences(root, command, env=None, prepare=None):
    """Runs every Tests/SessionRegressions script through `softchat replay` (Swift) and through
    `command + [script]` (a binding's replayer; `prepare(script)` gives the path it reads when it
    needs the script in another form) and compares them line by line. Returns (scripts identical,
    scripts, the first difference or None)."""
    swift = os.path.join(root, ".build/debug/softchat")
    scripts = sorted(glob.glob(os.path.join(root, "Tests/SessionRegressions/*.jsonl")))
    same, problem = 0, None
    for path in scripts:
        name = os.path.basename(path)
        want = subprocess.run([swift, "replay", path], capture_output=True, text=True).stdout.splitlines()
        p = subprocess.run(command + [prepare(path) if prepare else path], capture_output=True, text=True, env=env)
        got = p.stdout.splitlines()
        try:
            diffs = [n for n, (a, b) in enumerate(zip(want, got), 1)
                     if canonical_replay_line(json.loads(a)) != canonical_replay_line(json.loads(b))]
        except ValueError as e:
            diffs = [1]
            got = [f"not JSON ({e})"] + got
        if len(want) != len(got) or diffs or not want:
            n = diffs[0] if diffs else min(len(want), len(got)) + 1
            problem = problem or (f"{name} line {n}:\n  swift {want[n - 1] if 0 < n <= len(want) else '-'}\n"
                                  f"  binding {got[n - 1] if 0 < n <= len(got) else '-'}\n{p.stderr[-1500:]}")
        else:
            same += 1
    return same, len(scripts), problem
