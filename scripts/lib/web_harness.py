"""What scripts/facades/test-wasm and scripts/bench/bench-wasm share: a loopback HTTP server for the pages,
Workers and files headless Chromium loads (routes: URL prefix → folder; /fs/ reads any file under
the allowed roots), that collects what the pages POST back, and Chromium started headless on a URL."""
import http.server
import json
import shutil
import subprocess
import os
import threading


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes, roots, port=0):
        super().__init__(("127.0.0.1", port), Handler)
        self.routes = routes          # URL prefix → directory
        self.roots = roots            # directories /fs/ may read
        self.lines = []
        self.done = threading.Event()
        self.demo = None
        self.demo_done = threading.Event()
        self.results = {}             # any other POST path → its JSON body
        self.arrived = threading.Condition()

    def wait_for(self, path, timeout):
        """The JSON a page POSTed to `path`, or None if nothing came within `timeout` seconds."""
        with self.arrived:
            self.arrived.wait_for(lambda: path in self.results, timeout)
            return self.results.get(path)


class Handler(http.server.BaseHTTPRequestHandler):
    types = {".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".html": "text/html",
             ".json": "application/json", ".ts": "text/plain", ".txt": "text/plain", ".csv": "text/plain", ".css": "text/css",
             ".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".ico": "image/x-icon"}

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", kind="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def file(self, path):
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not os.path.isfile(path):
            return self.send(404)
        with open(path, "rb") as f:
            self.send(200, f.read(), self.types.get(os.path.splitext(path)[1], "application/octet-stream"))

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path.startswith("/fs/"):
            target = os.path.realpath(path[3:])
            if not any(target == r or target.startswith(r + os.sep) for r in self.server.roots):
                return self.send(403)
            return self.file(target)
        for prefix, directory in sorted(self.server.routes.items(), key=lambda kv: -len(kv[0])):
            if path.startswith(prefix):
                target = os.path.realpath(os.path.join(directory, path[len(prefix):]))
                if not target.startswith(os.path.realpath(directory)):
                    return self.send(403)
                return self.file(target)
        self.send(404)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode("utf-8", "replace")
        if self.path == "/report":
            if body == "#done":
                self.server.done.set()
            else:
                self.server.lines.extend(body.split("\n"))
        elif self.path == "/demo-result":
            self.server.demo = json.loads(body)
            self.server.demo_done.set()
        else:
            with self.server.arrived:
                self.server.results[self.path] = json.loads(body)
                self.server.arrived.notify_all()
        self.send(204)


def chromium(url, profile):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    return subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                             "--disable-extensions", f"--user-data-dir={profile}", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
