"""cdp.py — a small client of the Chrome DevTools Protocol over --remote-debugging-pipe, with
nothing but python3's standard library: Debian's chromium is started with the pipe on fds 3
(commands in) and 4 (events and replies out), messages are JSON separated by NUL bytes.

    with Browser(profile_dir) as b:
        page = b.new_page(1400, 1000)
        page.navigate("http://127.0.0.1:9467/")
        page.eval("document.title")
        page.screenshot("build/x.png")

Every page records console errors, uncaught exceptions and the browser's own error log
entries (page.errors) so a test can assert there were none."""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


class CDPError(Exception):
    pass


class Browser:
    def __init__(self, profile_dir, extra_args=()):
        self.profile_dir = profile_dir
        self.extra_args = list(extra_args)
        self.proc = None
        self.next_id = 0
        self.buf = b""
        self.pending_events = []

    def __enter__(self):
        if not self.proc:
            self.start()
        self.ready()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        exe = chromium_path()
        if not exe:
            raise CDPError("chromium is not installed (Debian package chromium)")
        os.makedirs(self.profile_dir, exist_ok=True)
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # the child's ends move to 3 and 4: first out of the way of those numbers
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
        os.close(to_child_r)
        os.close(from_child_w)
        to_child_r, from_child_w = high

        def fds():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        args = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-default-apps", "--disable-extensions",
            "--mute-audio", "--hide-scrollbars", "--user-data-dir=" + self.profile_dir,
            "--remote-debugging-pipe", "about:blank",
        ] + self.extra_args
        self.log = open(os.path.join(self.profile_dir, "chromium.log"), "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=fds,
                                     pass_fds=(3, 4))
        os.close(to_child_r)
        os.close(from_child_w)

    def ready(self, timeout=60):
        """Wait until the browser answers (start() only spawns it, so a caller can do
        other work while it comes up)."""
        return self.send("Browser.getVersion", timeout=timeout)

    def close(self):
        if self.proc and self.proc.poll() is None:
            # the profile is thrown away: no need for an orderly Browser.close
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in ("to_child", "from_child"):
            if getattr(self, fd, None) is not None:
                try:
                    os.close(getattr(self, fd))
                except OSError:
                    pass
                setattr(self, fd, None)
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    # -- the wire --------------------------------------------------------------------------
    def _write(self, msg):
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self.to_child, data)
            data = data[n:]

    def _read_one(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("no message from chromium in time")
            r, _, _ = select.select([self.from_child], [], [], left)
            if not r:
                continue
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise CDPError("chromium closed the pipe (see %s/chromium.log)" % self.profile_dir)
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._write(msg)
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_one(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise CDPError("%s: %s" % (method, m["error"].get("message")))
                return m.get("result", {})
            if "method" in m:
                self.pending_events.append(m)

    def pump(self, timeout=0.0):
        """Read the events that arrived (waiting at most timeout for the first)."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                if b"\0" not in self.buf:
                    r, _, _ = select.select([self.from_child], [], [],
                                            max(0.0, deadline - time.monotonic()))
                    if not r:
                        break
                m = self._read_one(time.monotonic() + 5)
                if "method" in m:
                    self.pending_events.append(m)
        except CDPError:
            pass
        ev, self.pending_events = self.pending_events, []
        return ev

    def new_page(self, width=1400, height=1000):
        t = self.send("Target.createTarget", {"url": "about:blank"})
        s = self.send("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})
        return Page(self, s["sessionId"], width, height)


class Page:
    def __init__(self, browser, session, width, height):
        self.b = browser
        self.session = session
        self.errors = []     # (time, text) of console errors, exceptions and error log entries
        self.loaded = False
        for domain in ("Page", "Runtime", "Log"):
            self.cmd(domain + ".enable")
        self.cmd("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def cmd(self, method, params=None, timeout=30):
        r = self.b.send(method, params, self.session, timeout)
        self._events(self.b.pump(0))
        return r

    def _events(self, events):
        for m in events:
            if m.get("sessionId") != self.session:
                continue
            meth, p = m["method"], m.get("params", {})
            if meth == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                text = d.get("exception", {}).get("description") or d.get("text")
                self.errors.append((time.time(), "exception: %s" % text))
            elif meth == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                self.errors.append((time.time(), "console.%s: %s" % (p["type"], args)))
            elif meth == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                self.errors.append((time.time(), "log (%s): %s %s" % (e.get("source"), e.get("text"), e.get("url", ""))))
            elif meth == "Page.loadEventFired":
                self.loaded = True

    def pump(self, timeout=0.0):
        self._events(self.b.pump(timeout))

    def navigate(self, url, timeout=30):
        self.loaded = False
        self.cmd("Page.navigate", {"url": url})
        self.wait_load(timeout)

    def reload(self, timeout=30):
        self.loaded = False
        self.cmd("Page.reload", {"ignoreCache": True})
        self.wait_load(timeout)

    def wait_load(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.loaded:
            if time.monotonic() > deadline:
                raise CDPError("the page did not finish loading in %d s" % timeout)
            self.pump(0.1)

    def eval(self, expr, timeout=30):
        r = self.cmd("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                          "awaitPromise": True}, timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CDPError("evaluating %r: %s" % (expr[:80], d.get("exception", {}).get("description") or d.get("text")))
        return r.get("result", {}).get("value")

    def wait_for(self, expr, timeout=20, interval=0.05):
        """Poll a JS expression until it is truthy; returns (value, seconds waited)."""
        t0 = time.monotonic()
        while True:
            v = self.eval(expr)
            if v:
                return v, time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise CDPError("timed out after %d s waiting for: %s" % (timeout, expr))
            self.pump(interval)

    def mouse_move(self, x, y):
        self.cmd("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def screenshot(self, path):
        r = self.cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return path
