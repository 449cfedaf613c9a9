"""The pass/fail tally the check and interop scripts share: each check prints its failures
(and, verbosely, its passes), and the summary line "NAME: N passed, M failed" ends the run
with exit status 1 if anything failed."""
import sys


class Tally:
    def __init__(self, name, show_passes=False):
        self.name = name
        self.show_passes = show_passes
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            if self.show_passes:
                print(f"  ok: {what}")
        else:
            self.failed += 1
            print(f"  FAIL: {what}" if self.show_passes else f"{self.name}: FAIL: {what}", file=sys.stderr)
        return ok

    def finish(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)
