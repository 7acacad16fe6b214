# SPDX-License-Identifier: LGPL-2.1-or-later
"""clustertest: nodefs instances joined through a real etcd cluster.

    with etcdtest.Etcd() as e, Node(e, "a", accept_remote=True) as a:
        ...
    with contextlib.ExitStack() as st:      # all at once, in threads
        e, a, b = started(st, etcdtest.Etcd(wait=False), Node(...), Node(...))
A Node is one nodefs mount (its own mount, state dir, node name) whose
[cluster] points at e, with the test CSI plugin started by nodefs itself
(so volumes can be made). Stdlib only, on top of nodefs_test.
"""
import os
import tempfile
import threading

import nodefs_test as nt
import etcdtest

PLUGIN_PY = os.path.join(nt.NODEFS_SRC, "tests", "fixtures", "csi", "plugin.py")


def started(stack, etcd, *nodes):
    """Enter etcd (made with wait=False) and nodes at once on stack (an
    ExitStack): the nodes start, each in a thread, while etcd's members
    elect a leader (a node keeps trying to connect), and they stop
    together at the end. Returns (etcd, *nodes), etcd healthy."""
    stack.enter_context(etcd)
    entered = [None] * len(nodes)
    errors = []

    def each(fn, i):
        try:
            fn(i)
        except BaseException as ex:  # noqa: B902 (re-raised below)
            errors.append(ex)

    def enter(i):
        entered[i] = nodes[i].__enter__()

    def exit_all(*exc):
        def leave(i):
            if entered[i] is not None:
                nodes[i].__exit__(*exc)
        del errors[:]
        ths = [threading.Thread(target=each, args=(leave, i)) for i in range(len(nodes))]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        if errors and exc[0] is None:
            raise errors[0]  # a node that did not stop cleanly
        return False
    ths = [threading.Thread(target=each, args=(enter, i)) for i in range(len(nodes))]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    stack.push(exit_all)
    if errors:
        raise errors[0]
    etcd.wait_healthy()
    return (etcd,) + tuple(entered)


def requires():
    nt.requires("mount", "csi-plugin")
    why = etcdtest.why_not()
    if why:
        nt.skip(why)


def config(etcd, node, tmp, accept_remote=False, ttl="3s", prefix="/nodefs", extra="",
           extra_conf="", plugin_args="", csi_timeout="5s"):
    return """[nodefs]
allowed_targets = {tmp}/pub
csi_timeout = {csi_timeout}
reconcile_interval = 0

[plugin hp]
endpoint = unix://{tmp}/csi.sock
command = /usr/bin/python3 {py} --base {tmp}/base {pargs}
default = yes

{extra_conf}
[cluster]
etcd = {ep}
node = {node}
prefix = {prefix}
lease_ttl = {ttl}
accept_remote = {acc}
{extra}
""".format(tmp=tmp, py=PLUGIN_PY, ep=etcd.endpoints, node=node, prefix=prefix, ttl=ttl,
           acc="yes" if accept_remote else "no", extra=extra,
           extra_conf=extra_conf, pargs=plugin_args, csi_timeout=csi_timeout)


class Node(nt.Nodefs):
    """bin: another nodefs binary than the build's (a benchmark's baseline);
    plugin_args: more arguments to the test CSI plugin (--delay RPC=S)."""
    def __init__(self, etcd, node, accept_remote=False, ttl="3s", extra="", extra_conf="",
                 prefix="/nodefs", bin=None, plugin_args="", csi_timeout="5s"):
        self.ptmp = tempfile.mkdtemp(prefix="nodefs-cl-%s-" % node)
        os.makedirs(os.path.join(self.ptmp, "pub"))
        self.node = node
        self.bin = bin
        self.conf = dict(accept_remote=accept_remote, ttl=ttl, extra=extra, extra_conf=extra_conf,
                         prefix=prefix, plugin_args=plugin_args, csi_timeout=csi_timeout)
        super().__init__(config(etcd, node, self.ptmp, **self.conf) if etcd else "")

    def argv(self):
        argv = super().argv()
        return [self.bin] + argv[1:] if self.bin else argv

    def etcd(self, etcd):
        """The etcd cluster of a Node made with None, before it starts."""
        self.config = config(etcd, self.node, self.ptmp, **self.conf)

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            nt.unmount_all_under(self.ptmp)
            import shutil
            shutil.rmtree(self.ptmp, ignore_errors=True)

    def wait_read(self, rel, pred, timeout=10):
        """Wait until pred(content of rel) holds; the last content."""
        last = [None]

        def ok():
            try:
                last[0] = self.read(rel)
            except OSError:
                return False
            return pred(last[0])
        if not nt.wait_until(ok, timeout):
            raise AssertionError("%s: %r after %ss" % (rel, last[0], timeout))
        return last[0]
