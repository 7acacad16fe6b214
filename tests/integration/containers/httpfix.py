# SPDX-License-Identifier: LGPL-2.1-or-later
"""httpfix: a loopback HTTP server the fetch tests start (http.server, a
handler of our own, on 127.0.0.1 and a free port, in a thread of the test).

Paths:
  /f/NAME          the bytes put under NAME (put()), with an ETag and a
                   Last-Modified; honours Range (206), If-Range,
                   If-None-Match and If-Modified-Since (304)
  /slow/NAME       the same, the body sent in 64 KiB pieces, sleeping
                   `slow_delay` seconds between them (no Range: 200 again)
  /ranged-slow/NAME  slow and honouring Range
  /cut/NAME        promises the whole, sends half, closes
  /status/CODE     answers CODE (404, 500) with a small body
  /redirect/N/NAME 302 to /redirect/N-1/NAME, down to /f/NAME
Every request is logged (method, path, Range, If-None-Match,
If-Modified-Since, If-Range, status) in `log`; `count(prefix)` counts the
requests whose path starts with prefix.
"""

import hashlib
import http.server
import threading
import time
from email.utils import formatdate


class Server:
    def __init__(self):
        self.files = {}
        self.log = []
        self.lock = threading.Lock()
        self.slow_delay = 0.05
        self.mtime = time.time() - 3600
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                srv._get(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def put(self, name, data):
        self.files[name] = data

    def etag(self, name):
        return '"%s"' % hashlib.sha256(self.files[name]).hexdigest()[:16]

    def count(self, prefix=""):
        with self.lock:
            return sum(1 for e in self.log if e["path"].startswith(prefix))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _note(self, h, status):
        with self.lock:
            self.log.append({"path": h.path, "range": h.headers.get("Range"),
                             "if_none_match": h.headers.get("If-None-Match"),
                             "if_modified_since": h.headers.get("If-Modified-Since"),
                             "if_range": h.headers.get("If-Range"), "status": status})

    def _send(self, h, status, headers, body=b""):
        self._note(h, status)
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        if body:
            h.wfile.write(body)

    def _get(self, h):
        parts = h.path.split("/")
        kind = parts[1] if len(parts) > 1 else ""
        if kind == "status":
            code = int(parts[2])
            return self._send(h, code, [("Content-Length", "5")], b"nope\n")
        if kind == "redirect":
            n = int(parts[2])
            name = "/".join(parts[3:])
            to = "/f/%s" % name if n <= 1 else "/redirect/%d/%s" % (n - 1, name)
            return self._send(h, 302, [("Location", to), ("Content-Length", "0")])
        name = "/".join(parts[2:])
        if name not in self.files:
            return self._send(h, 404, [("Content-Length", "5")], b"none\n")
        data = self.files[name]
        etag = self.etag(name)
        lm = formatdate(self.mtime, usegmt=True)
        common = [("ETag", etag), ("Last-Modified", lm), ("Accept-Ranges", "bytes")]
        if kind in ("f", "ranged-slow"):
            inm = h.headers.get("If-None-Match")
            ims = h.headers.get("If-Modified-Since")
            if (inm and inm == etag) or (not inm and ims and ims == lm):
                return self._send(h, 304, common)
        start = 0
        rng = h.headers.get("Range")
        ifr = h.headers.get("If-Range")
        if rng and kind in ("f", "ranged-slow") and (not ifr or ifr in (etag, lm)):
            start = int(rng.split("=")[1].split("-")[0])
        body = data[start:]
        if start:
            hdr = common + [("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data))),
                            ("Content-Length", str(len(body)))]
            status = 206
        else:
            hdr = common + [("Content-Length", str(len(data)))]
            status = 200
        if kind == "cut":
            self._note(h, 200)
            h.send_response(200)
            for k, v in hdr:
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(body[:len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            return
        if kind in ("slow", "ranged-slow"):
            self._note(h, status)
            h.send_response(status)
            for k, v in hdr:
                h.send_header(k, v)
            h.end_headers()
            try:
                for off in range(0, len(body), 65536):
                    h.wfile.write(body[off:off + 65536])
                    h.wfile.flush()
                    time.sleep(self.slow_delay)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        return self._send(h, status, hdr, body)
