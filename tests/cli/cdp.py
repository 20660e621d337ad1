#!/usr/bin/env python3
"""cdp.py - drive headless Chromium through the Chrome DevTools Protocol over a pipe.

Standard library only. Chromium is started with --remote-debugging-pipe: it reads CDP
commands from its fd 3 and writes replies and events to its fd 4, each message one JSON
text ended by a NUL byte. Browser opens one page at a time and acts on it like a user:
real mouse events (Input.dispatchMouseEvent), typed text, JS evaluation, screenshots.

    with Browser() as b:
        b.open("http://127.0.0.1:8080/"); b.wait("document.querySelector('tr')")
        b.click("#refresh"); b.screenshot("page.png")

Self-test: python3 tests/cli/cdp.py --selftest [--chromium PATH]
"""
import base64, collections, contextlib, json, os, select, shutil, signal, subprocess, sys
import tempfile, time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
         "--disable-extensions", "--disable-background-networking", "--disable-sync",
         "--disable-component-update", "--disable-default-apps", "--password-store=basic"]


class CDPError(Exception):
    """A CDP error reply, a JS exception, a missing element or a dead browser."""


class JSException(CDPError):
    """An exception thrown by the page's JS in eval()."""


class Browser:
    def __init__(self, chromium="chromium", profile_dir=None, width=1280, height=900,
                 timeout=60.0):
        exe = shutil.which(chromium)
        if not exe:
            raise CDPError("chromium not found: %r" % chromium)
        self.timeout, self.width, self.height = timeout, width, height
        self.own_profile = profile_dir is None  # a temporary profile is removed by close()
        self.profile_dir = profile_dir or tempfile.mkdtemp(prefix="cdp-profile-")
        os.makedirs(self.profile_dir, exist_ok=True)
        self.err_path = os.path.join(self.profile_dir, "chromium.err")
        self.events = collections.deque(maxlen=5000)  # events read while awaiting replies
        self.session = self.target = None
        self.closed, self._id, self._buf = False, 0, b""
        args = [exe] + FLAGS + ["--user-data-dir=" + self.profile_dir,
                                     "--remote-debugging-pipe",
                                     "--window-size=%d,%d" % (width, height), "about:blank"]
        cmd_r, self._cmd_w = os.pipe()   # we write commands, chromium reads them on fd 3
        self._out_r, out_w = os.pipe()   # chromium writes on fd 4, we read

        def child_fds():  # in the child: put the pipe ends on fds 3 and 4
            a, b = os.dup(cmd_r), os.dup(out_w)  # copies first, so 3 and 4 can't clobber them
            os.dup2(a, 3), os.dup2(b, 4)

        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=(3, 4),
                preexec_fn=child_fds, start_new_session=True,
                env=dict(os.environ, HOME=self.profile_dir))
        os.close(cmd_r), os.close(out_w)  # keep only our ends: a dead chromium reads as EOF
        try:
            self.version = self.send("Browser.getVersion")["product"]
        except BaseException:
            self.close()
            raise

    # -- protocol plumbing --------------------------------------------------------------
    def _died(self):
        """The CDPError for a chromium that exited (or closed its pipe)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        rc = self.proc.returncode
        with open(self.err_path, errors="replace") as f:
            tail = "".join(f.readlines()[-15:])
        return CDPError("chromium exited (code %s); end of %s:\n%s" % (rc, self.err_path, tail))

    def _read_message(self, deadline, what):
        """The next message from chromium; TimeoutError naming `what` after deadline."""
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium: timed out waiting for " + what)
            if select.select([self._out_r], [], [], min(left, 1.0))[0]:
                data = os.read(self._out_r, 1 << 20)
                if not data:
                    raise self._died()
                self._buf += data
            elif self.proc.poll() is not None:
                raise self._died()
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=None):
        """Sends one command, returns its result; events read meanwhile go to self.events."""
        if self.closed:
            raise CDPError("browser is closed")
        deadline = time.monotonic() + (timeout or self.timeout)
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            if not select.select([], [self._cmd_w], [], max(0, deadline - time.monotonic()))[1]:
                raise TimeoutError("chromium: timed out sending " + method)
            try:
                data = data[os.write(self._cmd_w, data):]
            except BrokenPipeError:
                raise self._died() from None
        while True:
            reply = self._read_message(deadline, "the reply to " + method)
            if reply.get("id") == self._id:
                break
            self.events.append(reply)  # an event (or a late reply to a timed-out command)
        if "error" in reply:
            raise CDPError("%s: %s" % (method, reply["error"].get("message", reply["error"])))
        return reply.get("result", {})

    def page(self, method, params=None, timeout=None):
        """send() to the page opened by open()."""
        if not self.session:
            raise CDPError("no page: call open(url) first")
        return self.send(method, params, self.session, timeout)

    def wait_event(self, method, timeout=None):
        """Waits for (and removes) the first event `method` of the page; returns its params."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for ev in self.events:
                if ev.get("method") == method and ev.get("sessionId") == self.session:
                    self.events.remove(ev)
                    return ev.get("params", {})
            self.events.append(self._read_message(deadline, "event " + method))

    # -- user-level API -----------------------------------------------------------------
    def open(self, url):
        """Opens url in a new page (closing the previous one) and waits for its load event."""
        if self.target:
            self.send("Target.closeTarget", {"targetId": self.target})
        self.target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": self.target, "flatten": True})["sessionId"]
        self.page("Page.enable")
        self.page("Runtime.enable")
        self.page("Emulation.setDeviceMetricsOverride", {  # fixed viewport, 1 px per CSS px
            "width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self.events.clear()
        nav = self.page("Page.navigate", {"url": url})
        if nav.get("errorText"):
            raise CDPError("cannot open %s: %s" % (url, nav["errorText"]))
        self.wait_event("Page.loadEventFired")

    def eval(self, js):
        """The value of the JS expression js (promises awaited); JSException if it throws."""
        r = self.page("Runtime.evaluate",
                      {"expression": js, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise JSException("JS error in %r: %s" % (
                js, d.get("exception", {}).get("description") or d.get("text")))
        return r.get("result", {}).get("value")

    def wait(self, js, timeout=20.0, interval=0.1):
        """Polls eval(js) until it is truthy and returns it (a throw counts as false)."""
        deadline, last_err = time.monotonic() + timeout, ""
        while True:
            try:
                value = self.eval(js)
                if value:
                    return value
            except JSException as e:
                last_err = " (last error: %s)" % e
            if time.monotonic() >= deadline:
                raise TimeoutError("timed out after %gs waiting for %s%s" % (timeout, js, last_err))
            time.sleep(interval)

    def rect(self, selector):
        """Scrolls the element into view; its box in viewport CSS px and the page scroll."""
        r = self.eval("""(() => { const e = document.querySelector(%s);
            if (!e) return null;
            e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
            const r = e.getBoundingClientRect();
            return {x: r.left, y: r.top, w: r.width, h: r.height,
                    sx: window.scrollX, sy: window.scrollY}; })()""" % json.dumps(selector))
        if r is None:
            raise CDPError("no element matches %r" % selector)
        if r["w"] <= 0 and r["h"] <= 0:
            raise CDPError("element %r has an empty box (hidden?)" % selector)
        return r

    def _mouse(self, kind, x, y, held=False):
        """One Input.dispatchMouseEvent; held: the left button is down during a move."""
        ev = {"type": kind, "x": x, "y": y,
              "button": "none" if kind == "mouseMoved" and not held else "left",
              "buttons": 1 if held or kind == "mousePressed" else 0}
        if kind != "mouseMoved":
            ev["clickCount"] = 1
        self.page("Input.dispatchMouseEvent", ev)

    def click(self, selector):
        """A real left click at the centre of the element."""
        self.drag(selector, 0.5, 0.5, steps=0)

    def hover(self, selector, dx=0.0, dy=0.0):
        """Moves the mouse to the element's centre plus (dx, dy) CSS px."""
        r = self.rect(selector)
        self._mouse("mouseMoved", r["x"] + r["w"] / 2 + dx, r["y"] + r["h"] / 2 + dy)

    def drag(self, selector, x0_frac, x1_frac, y_frac=0.5, steps=5):
        """Presses at x0_frac of the element's width, moves in steps, releases at x1_frac."""
        r = self.rect(selector)
        x0, x1 = r["x"] + r["w"] * x0_frac, r["x"] + r["w"] * x1_frac
        y = r["y"] + r["h"] * y_frac
        self._mouse("mouseMoved", x0, y)
        self._mouse("mousePressed", x0, y)
        for i in range(1, steps + 1):
            self._mouse("mouseMoved", x0 + (x1 - x0) * i / steps, y, held=True)
        self._mouse("mouseReleased", x1, y)

    def type(self, selector, text):
        """Focuses the element and inserts text as if typed (fires input events)."""
        self.rect(selector)  # raises if absent
        self.eval("document.querySelector(%s).focus()" % json.dumps(selector))
        self.page("Input.insertText", {"text": text})

    def screenshot(self, path, selector=None):
        """Writes a PNG of the viewport, or of just the element matching selector."""
        params = {"format": "png"}
        if selector:
            r = self.rect(selector)  # clip is in document coordinates, hence the scroll
            params["clip"] = {"x": r["x"] + r["sx"], "y": r["y"] + r["sy"],
                              "width": r["w"], "height": r["h"], "scale": 1}
        data = base64.b64decode(self.page("Page.captureScreenshot", params)["data"])
        with open(path, "wb") as f:
            f.write(data)
        return data

    def close(self):
        """Closes chromium (killed after 10 s); safe to call twice."""
        if self.closed:
            return
        with contextlib.suppress(CDPError, TimeoutError, OSError):
            self.send("Browser.close", timeout=5)
        self.closed = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):  # kill it and any helper left in its group
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self._cmd_w), os.close(self._out_r)
        if self.own_profile:
            shutil.rmtree(self.profile_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


SELFTEST_HTML = """<!doctype html><body style="margin:0;height:2400px">
<button id="b" onclick="document.getElementById('out').textContent='clicked'">Go</button>
<div id="out">idle</div><input id="t">
<svg id="s" width="400" height="200" style="position:absolute;left:100px;top:1500px">
<rect width="400" height="200" fill="#0a0"/></svg>
<script>const s = document.getElementById('s');
const at = e => e.clientX - s.getBoundingClientRect().left;
s.onmousedown = e => window.down = at(e); s.onmouseup = e => window.up = at(e);
s.onmousemove = e => window.moved = at(e);</script>"""


def selftest(chromium, tmp):
    """Clicks, types, hovers and drags on SELFTEST_HTML; AssertionError on a failure."""
    page = os.path.join(tmp, "page.html")
    with open(page, "w") as f:
        f.write(SELFTEST_HTML)
    with Browser(chromium, profile_dir=os.path.join(tmp, "profile"), timeout=30) as b:
        b.open("file://" + page)
        b.click("#b")
        b.wait("document.getElementById('out').textContent == 'clicked'", timeout=5)
        b.type("#t", "hello")
        assert b.eval("document.getElementById('t').value") == "hello", "type() failed"
        b.hover("#s", dx=10)  # the svg is below the fold: scrolled into view first
        assert abs(b.eval("window.moved") - 210) < 2, "hover() at %s" % b.eval("window.moved")
        b.drag("#s", 0.2, 0.8)
        down, up = b.eval("[window.down, window.up]")
        assert abs(down - 80) < 2 and abs(up - 320) < 2, "drag() gave %s..%s" % (down, up)
        for sel, size in (("#s", (400, 200)), (None, (b.width, b.height))):
            png = b.screenshot(os.path.join(tmp, "shot.png"), sel)
            assert png[:8] == b"\x89PNG\r\n\x1a\n", "screenshot is not a PNG"
            w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
            assert (w, h) == size, "screenshot(%s) is %dx%d" % (sel, w, h)
        for bad in (lambda: b.eval("nosuchname.x"), lambda: b.click("#nosuch")):
            try:
                bad()
                raise AssertionError("no CDPError for a throwing eval() or a missing element")
            except CDPError:
                pass


if __name__ == "__main__":
    if "--selftest" not in sys.argv[1:]:
        sys.exit("usage: cdp.py --selftest [--chromium PATH]")
    exe = sys.argv[sys.argv.index("--chromium") + 1] if "--chromium" in sys.argv else "chromium"
    tmp = tempfile.mkdtemp(prefix="cdp-selftest-")
    try:
        selftest(exe, tmp)
    except Exception as e:  # one clear line
        sys.exit("cdp selftest: FAILED: %s: %s" % (type(e).__name__, " | ".join(
            line for line in str(e).splitlines() if line.strip())))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("cdp selftest: ok")
