"""``python -m inferlab.grade SUBMISSIONS... --out DIR``: the grader's command line (``inferlab.exercises.grader``)."""

from inferlab.exercises.grader import main

if __name__ == "__main__":
    raise SystemExit(main())
