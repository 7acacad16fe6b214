# SPDX-License-Identifier: LGPL-2.1-or-later
"""info.json of every volume, container, operation and plugin is valid JSON
that jq parses (`jq -e .`), read through the mount as a monitoring agent
would, and names its object.
"""

import json
import os
import subprocess
import unittest

import nodefs_test as nt
import observe as ob


class InfoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = ob.World(docker=True)
        cls.w.__enter__()
        try:
            cls.w.volume("iv", publish=True)
            cls.w.volume("iw")
            cls.w.container("ic")
            cls.w.container("id", cmd="true")
        except BaseException:
            cls.w.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def jq_all(self, kind):
        names = self.w.fs.listdir(kind)
        names = [n for n in names
                 if os.path.isdir(self.w.fs.path(kind, n))]
        self.assertTrue(names, "no %s" % kind)
        for n in names:
            path = self.w.fs.path(kind, n, "info.json")
            with self.subTest(path="%s/%s/info.json" % (kind, n)):
                self.assertTrue(os.path.exists(path), "missing")
                p = subprocess.run(["jq", "-e", ".", path],
                                   capture_output=True, text=True, timeout=10)
                self.assertEqual(p.returncode, 0, p.stderr)
                obj = json.loads(p.stdout)
                self.assertIsInstance(obj, dict)
                self.assertIn(n, json.dumps(obj), "does not name its object")
        return names

    def test_volumes(self):
        self.jq_all("volumes")

    def test_containers(self):
        self.jq_all("containers")

    def test_operations(self):
        names = self.jq_all("operations")
        self.assertGreaterEqual(len(names), 5)

    def test_plugins(self):
        self.jq_all("plugins")

    def test_jq_query_across_objects(self):
        """What an agent does: one jq over every volume's info.json."""
        p = subprocess.run(
            "jq -r '.name + \" \" + .state' volumes/*/info.json | sort",
            shell=True, cwd=self.w.fs.mnt, capture_output=True, text=True,
            timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "iv PUBLISHED\niw CREATED\n")


if __name__ == "__main__":
    nt.main("prog:jq", "mount", "csi-plugin", "docker")
