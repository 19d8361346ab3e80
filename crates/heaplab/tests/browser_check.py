#!/usr/bin/env python3
"""Opens a report.html in headless Chromium (Debian's `chromium`) through the
DevTools protocol on a pipe, and fails on any console error, uncaught
exception or network request, on a flame-graph frame whose script did not
run, or on a page wider than a narrow window.

    browser_check.py REPORT.html [--screenshot PNG] [--frames N]

Run by crates/heaplab/tests/browser.rs. Exit status 0: clean; 1: problems
(listed on stderr); 2: the browser could not be used.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def find_browser():
    for b in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(b)
        if p:
            return p
    return None


class Cdp:
    """The DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self, browser, profile):
        r_cmd, w_cmd = os.pipe()  # we write commands, the browser reads fd 3
        r_ev, w_ev = os.pipe()  # the browser writes fd 4, we read
        def child():
            os.dup2(r_cmd, 3)
            os.dup2(w_ev, 4)
        args = [browser, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", "--user-data-dir=" + profile,
                "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--disable-default-apps",
                "--window-size=1200,900", "about:blank"]
        self.proc = subprocess.Popen(args, pass_fds=(3, 4, r_cmd, w_ev), preexec_fn=child,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(r_cmd)
        os.close(w_ev)
        self.w = os.fdopen(w_cmd, "wb", buffering=0)
        self.r = os.fdopen(r_ev, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read(self, deadline):
        import select
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no answer from the browser")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r.fileno(), 1 << 20)
                if not chunk:
                    raise EOFError("the browser closed the pipe")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        m = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            m["sessionId"] = session
        self.w.write(json.dumps(m).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            msg = self._read(deadline)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            self.events.append(msg)

    def pump(self, seconds):
        deadline = time.time() + seconds
        try:
            while True:
                self.events.append(self._read(deadline))
        except TimeoutError:
            pass

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    report = os.path.abspath(sys.argv[1])
    shot = sys.argv[sys.argv.index("--screenshot") + 1] if "--screenshot" in sys.argv else None
    want_frames = int(sys.argv[sys.argv.index("--frames") + 1]) if "--frames" in sys.argv else None
    browser = find_browser()
    if not browser:
        print("no chromium on PATH", file=sys.stderr)
        return 2
    url = "file://" + report
    profile = tempfile.mkdtemp(prefix="heaplab-browser-")
    problems = []
    cdp = Cdp(browser, profile)
    try:
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        sessions = [s]
        for dom in ("Runtime", "Log", "Network", "Page"):
            cdp.call(dom + ".enable", session=s)
        cdp.call("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False,
                                          "flatten": True}, session=s)
        cdp.call("Page.navigate", {"url": url}, session=s)
        cdp.pump(4.0)
        # frames in their own processes attach as targets: listen to them too
        for e in list(cdp.events):
            if e.get("method") == "Target.attachedToTarget":
                sid = e["params"]["sessionId"]
                sessions.append(sid)
                for dom in ("Runtime", "Log", "Network"):
                    try:
                        cdp.call(dom + ".enable", session=sid)
                    except RuntimeError:
                        pass
        cdp.pump(1.5)
        for e in cdp.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                problems.append("exception: %s" % p["exceptionDetails"].get("text"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                problems.append("console %s: %s" % (p["type"], [a.get("value") for a in p.get("args", [])]))
            elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                problems.append("log %s: %s %s" % (p["entry"]["level"], p["entry"].get("text"), p["entry"].get("url", "")[:80]))
            elif m == "Network.requestWillBeSent":
                u = p["request"]["url"]
                if not (u == url or u.startswith("data:")):
                    problems.append("network request: %s" % u[:200])
        # every flame graph's own script ran (inferno's init removes the
        # svg's fixed width so it fits its frame) and drew its frames
        # frames from data: URLs run in processes of their own (attached targets);
        # same-process ones are in the page's frame tree
        ran = 0
        contexts = []
        for e in cdp.events:
            if e.get("method") == "Target.attachedToTarget" and e.get("sessionId") == s:
                contexts.append((e["params"]["sessionId"], None))
        tree = cdp.call("Page.getFrameTree", session=s)["frameTree"]
        for c in tree.get("childFrames", []):
            fid = c["frame"]["id"]
            ctx = [e["params"]["context"]["id"] for e in cdp.events
                   if e.get("method") == "Runtime.executionContextCreated" and e.get("sessionId") == s
                   and e["params"]["context"].get("auxData", {}).get("frameId") == fid
                   and e["params"]["context"].get("auxData", {}).get("isDefault")]
            if not ctx:
                problems.append("no script context in frame %s" % fid)
                continue
            contexts.append((s, ctx[-1]))
        for sid, ctx in contexts:
            params = {"returnByValue": True, "expression":
                      "[typeof known_font_width === 'number', document.querySelectorAll('g rect').length]"}
            if ctx is not None:
                params["contextId"] = ctx
            r = cdp.call("Runtime.evaluate", params, session=sid)
            ran_init, rects = r["result"]["value"]
            if not ran_init or rects == 0:
                problems.append("flame graph frame: script ran=%s, %d frames drawn" % (ran_init, rects))
            else:
                ran += 1
        if want_frames is not None and ran != want_frames:
            problems.append("%d flame graphs ran, expected %d" % (ran, want_frames))
        if shot:
            png = cdp.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=s)
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png["data"]))
        # a narrow window: nothing wider than it but the scrolling tables
        cdp.call("Emulation.setDeviceMetricsOverride", {"width": 420, "height": 800,
                 "deviceScaleFactor": 1, "mobile": False}, session=s)
        cdp.pump(0.5)
        r = cdp.call("Runtime.evaluate", {"returnByValue": True, "expression":
                     "[document.documentElement.scrollWidth, window.innerWidth]"}, session=s)
        sw, iw = r["result"]["value"]
        if sw > iw + 1:
            problems.append("the page is %d px wide in a %d px window" % (sw, iw))
        # the tables sort: click the first sortable header of the last table
        r = cdp.call("Runtime.evaluate", {"returnByValue": True, "expression":
                     "(function(){var t=document.querySelectorAll('table');if(!t.length)return 'none';"
                     "var th=t[t.length-1].tHead.rows[0].cells[0];th.click();"
                     "return th.getAttribute('aria-sort')})()"}, session=s)
        if r["result"].get("value") not in ("ascending", "none"):
            problems.append("clicking a header did not sort: %s" % r["result"])
    except (TimeoutError, EOFError, RuntimeError, OSError) as e:
        print("browser: %s" % e, file=sys.stderr)
        return 2
    finally:
        cdp.close()
        shutil.rmtree(profile, ignore_errors=True)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
