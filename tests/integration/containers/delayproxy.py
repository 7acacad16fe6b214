# SPDX-License-Identifier: LGPL-2.1-or-later
"""A unix-socket proxy in front of a dockerd that holds back each request
it matches (by default POST .../containers/create; `match` names another
method and path part, e.g. DELETE .../containers/) for `delay` seconds
before passing it on, and keeps passing it on after its client went away (a
daemon killed while the call was pending): the engine then acts after the
new daemon has looked. Everything else goes through at once."""
import os
import socket
import threading
import time


class DelayProxy:
    def __init__(self, upstream, path, delay, drop=False,
                 match=(b"POST", b"/containers/create")):
        self.upstream = upstream          # dockerd's socket path
        self.path = path
        self.delay = delay
        self.drop = drop                  # held requests are never passed on
        self.match = match
        self.creates = 0                  # held requests seen
        self.sent = 0                     # and passed on
        self.lock = threading.Lock()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(64)
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closing = True
        try:
            self.srv.close()
        finally:
            if os.path.exists(self.path):
                os.unlink(self.path)

    def _accept(self):
        while not self.closing:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            u.connect(self.upstream)
        except OSError:
            c.close()
            return
        threading.Thread(target=self._back, args=(u, c), daemon=True).start()
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                if data.startswith(self.match[0]) and self.match[1] in data.split(b"\r\n", 1)[0]:
                    with self.lock:
                        self.creates += 1
                    time.sleep(self.delay)
                    if self.drop:
                        break
                    with self.lock:
                        self.sent += 1
                u.sendall(data)
        except OSError:
            pass
        # the client is gone: give the engine its time to answer, then close
        time.sleep(5)
        u.close()

    def _back(self, u, c):
        try:
            while True:
                data = u.recv(65536)
                if not data:
                    break
                try:
                    c.sendall(data)
                except OSError:
                    pass
        except OSError:
            pass
        try:
            c.close()
        except OSError:
            pass
