# SPDX-License-Identifier: LGPL-2.1-or-later
"""The harness's own contract with meson (nodefs_test.main, requires): a
file whose cases all pass exits 0, a failed case exits 1 whatever else, a
skipped case (self.skipTest, nt.skip or nt.requires inside setUp or a case,
or a need missing before the cases) exits 77, meson's SKIP, so a skip can
never pass silently. Each is a small test program run as a child. Needs
nothing: no root, no mount."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import nodefs_test as nt

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = textwrap.dedent('''
    import unittest
    import nodefs_test as nt

    class T(unittest.TestCase):
        def setUp(self):
            if MODE == "requires-in-setup":
                nt.requires("prog:nodefs-no-such-program")
            if MODE == "skip-in-setup":
                nt.skip("skipped in setUp")

        def test_a(self):
            if MODE == "skiptest":
                self.skipTest("skipped in a case")
            if MODE == "fail-and-skip":
                self.fail("failed")

        def test_b(self):
            if MODE == "fail-and-skip":
                self.skipTest("skipped beside a failure")

    if __name__ == "__main__":
        if MODE == "needs-before":
            nt.main("prog:nodefs-no-such-program")
        elif MODE == "requires-callable":
            nt.main(requires=lambda: nt.requires("prog:nodefs-no-such-program:pkgname"))
        else:
            nt.main(requires=None)
''')


class HarnessExit(unittest.TestCase):
    def run_mode(self, mode):
        with tempfile.TemporaryDirectory() as d:
            prog = os.path.join(d, "t.py")
            with open(prog, "w") as f:
                f.write("MODE = %r\n" % mode + PROGRAM)
            env = dict(os.environ, PYTHONPATH=HERE, PYTHONDONTWRITEBYTECODE="1")
            p = subprocess.run([sys.executable, prog], capture_output=True,
                               text=True, env=env, timeout=60)
            return p.returncode, p.stdout + p.stderr

    def test_all_pass_exits_0(self):
        self.assertEqual(self.run_mode("pass")[0], 0)

    def test_skiptest_in_a_case_exits_77(self):
        rc, out = self.run_mode("skiptest")
        self.assertEqual(rc, nt.SKIP, out)
        self.assertIn("SKIP: ", out)
        self.assertIn("skipped in a case", out)

    def test_requires_in_setup_exits_77(self):
        rc, out = self.run_mode("requires-in-setup")
        self.assertEqual(rc, nt.SKIP, out)
        self.assertIn("nodefs-no-such-program missing (Debian package "
                      "nodefs-no-such-program)", out)

    def test_skip_in_setup_is_a_skip_not_an_error(self):
        self.assertEqual(self.run_mode("skip-in-setup")[0], nt.SKIP)

    def test_failure_beats_skip(self):
        self.assertEqual(self.run_mode("fail-and-skip")[0], 1)

    def test_needs_before_the_cases_exit_77(self):
        rc, out = self.run_mode("needs-before")
        self.assertEqual(rc, nt.SKIP, out)
        self.assertNotIn("Ran ", out)
        rc, out = self.run_mode("requires-callable")
        self.assertEqual(rc, nt.SKIP, out)
        self.assertIn("(Debian package pkgname)", out)

    def test_why_not(self):
        self.assertIsNone(nt.why_not())
        self.assertIsNone(nt.why_not("prog:sh"))
        self.assertRaises(ValueError, nt.why_not, "no-such-need")


if __name__ == "__main__":
    nt.main(requires=None)
