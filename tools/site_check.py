"""Check the built documentation site in a real browser: headless Chromium (Debian's `chromium`) opens pages,
waits for MathJax, counts the rendered formulas and MathJax errors, loads every image (naturalWidth > 0) and takes
screenshots; every relative link of every page of the site is checked to lead to a file of the site.

    python tools/site_check.py [_build/docs/html] [--shots DIR] [PAGE ...]

It speaks the Chrome DevTools Protocol over a pipe (--remote-debugging-pipe), so it needs no Python package.
"""
import argparse, base64, json, os, re, subprocess, sys, tempfile, time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["index.html", "nbs/10_uncertainty.html", "docs/results/table1.html"]   # the pages the browser test looks at


class Browser:
    "Headless Chromium driven over the DevTools protocol on a pipe (fd 3: commands in, fd 4: replies out)."
    def __init__(self, binary: str = "chromium", width: int = 1280, height: int = 1000):
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        self._profile = tempfile.TemporaryDirectory(prefix="ugttt-chromium-")
        def fds():   # in the child: the pipe ends on the fds Chromium reads and writes
            os.dup2(cmd_r, 3); os.dup2(res_w, 4)
        self.proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                                      "--allow-file-access-from-files", f"--window-size={width},{height}", "about:blank"],
                                     pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r); os.close(res_w)
        self._buf, self._id, self.events = b"", 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime"): self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _read(self, timeout: float) -> dict:
        end = time.monotonic() + timeout
        while b"\0" not in self._buf:
            if time.monotonic() > end: raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk: raise RuntimeError("Chromium closed its pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        "Send one command and wait for its reply (events met on the way are kept in self.events)."
        self._id += 1
        msg = dict(id=self._id, method=method, params=params, **({"sessionId": self.session} if session else {}))
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            r = self._read(timeout)
            if r.get("id") == self._id:
                if "error" in r: raise RuntimeError(f"{method}: {r['error']}")
                return r.get("result", {})
            self.events.append(r)

    def wait_event(self, name: str, timeout: float = 60) -> dict:
        end = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == name: return self.events.pop(i)
            self.events.append(self._read(max(0.1, end - time.monotonic())))

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, js: str, timeout: float = 60):
        r = self.call("Runtime.evaluate", session=True, timeout=timeout, expression=js, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r: raise RuntimeError(f"script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path: Path) -> None:
        Path(path).write_bytes(base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"]))

    def close(self) -> None:
        try: self.call("Browser.close", timeout=10)
        except Exception: pass
        try: self.proc.wait(10)
        except subprocess.TimeoutExpired: self.proc.kill()
        os.close(self._cmd_w); os.close(self._res_r); self._profile.cleanup()


# the page's state once MathJax has typeset it and every image has loaded (or failed)
INSPECT = """(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const imgs = [...document.images];
  for (const i of imgs) i.loading = 'eager';
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  return {title: document.title,
          math_sources: document.querySelectorAll('.math').length,
          math_rendered: document.querySelectorAll('mjx-container').length,
          math_errors: document.querySelectorAll('mjx-merror').length,
          images: imgs.map(i => ({src: i.getAttribute('src'), width: i.naturalWidth}))};
})()"""


def inspect_pages(html: Path, pages: list[str], shots: Path | None, binary: str = "chromium") -> dict:
    "Open each page in headless Chromium: its math and images (INSPECT), and screenshots of its top and first formula."
    out, b = {}, Browser(binary)
    try:
        for page in pages:
            b.open((html / page).resolve().as_uri())
            info = b.evaluate(INSPECT)
            if shots:
                shots.mkdir(parents=True, exist_ok=True)
                stem = page.replace("/", "_").removesuffix(".html")
                b.evaluate("window.scrollTo({top: 0, behavior: 'instant'})"); b.screenshot(shots / f"{stem}.png")
                for what, sel in (("math", "mjx-container[display='true']\") || document.querySelector(\"mjx-container"), ("figure", "img")):
                    if b.evaluate(f"(async () => {{ const e = document.querySelector(\"{sel}\"); if (!e) return false; "
                                  "e.scrollIntoView({block: 'center', behavior: 'instant'}); "   # the theme scrolls smoothly
                                  "await new Promise(r => setTimeout(r, 300)); return true; })()"):
                        b.screenshot(shots / f"{stem}-{what}.png")
            out[page] = info
    finally: b.close()
    return out


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(); self.links = []
    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v and ((tag == "a" and k == "href") or (tag in ("img", "script") and k == "src") or (tag == "link" and k == "href")):
                self.links.append(v)


def broken_links(html: Path) -> list[tuple[str, str]]:
    "Every relative link (href, src) of every page of the site whose file does not exist: (page, link)."
    bad = []
    for page in sorted(html.rglob("*.html")):
        p = _Links(); p.feed(page.read_text(errors="replace"))
        for link in p.links:
            u = urlsplit(link)
            if u.scheme or u.netloc or not u.path: continue           # external (not checked offline) or same-page anchor
            target = (page.parent / unquote(u.path)).resolve()
            if not target.exists(): bad.append((str(page.relative_to(html)), link))
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html", nargs="?", default=str(ROOT / "_build" / "docs" / "html"))
    ap.add_argument("pages", nargs="*", default=PAGES)
    ap.add_argument("--shots", help="folder for the screenshots")
    args = ap.parse_args(argv)
    html = Path(args.html)
    info = inspect_pages(html, args.pages, Path(args.shots) if args.shots else None)
    print(json.dumps(info, indent=1))
    bad = broken_links(html)
    print(f"{len(bad)} broken links" + "".join(f"\n  {p}: {l}" for p, l in bad[:50]))
    ok = not bad and all(i["math_errors"] == 0 and all(im["width"] > 0 for im in i["images"]) for i in info.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
