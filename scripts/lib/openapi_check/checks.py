"""The verdicts: one PASS, FAIL or SKIP line per check, and their counts."""

import sys


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def record(self, name, problems, detail=""):
        if problems:
            self.failed += 1
            print(f"FAIL  {name}" + (f" ({detail})" if detail else "") + ": " + "; ".join(problems))
        else:
            self.passed += 1
            print(f"PASS  {name}" + (f" ({detail})" if detail else ""))
        sys.stdout.flush()
        return not problems

    def skip(self, name, why):
        print(f"SKIP  {name}: {why}")
