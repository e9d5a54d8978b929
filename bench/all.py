"""bench/all: every figure of issue 17 from one run, each next to its anchors.

1. The packaged helper (bench/installed_helper -> bench/hot_path): cached path (the C fast
   path), the same with the fast path off, the fallback's cost, start-up, the development
   launcher, a bare `python3 -I -S`, gke-gcloud-auth-plugin and cat; kubectl ratio against a
   static token. Targets (issue 23): cached path <= 3 ms and below the Go plugin, ratio
   <= 1.04, fallback <= 1 ms over the path without it. With --before DIR, the same for an
   older bundle (e.g. one built from main) in the same run.
2. The agent's first start to its first answer (bench/agent_start), packaged and development
   helper (and --before). Target: <= 300 ms.
3. The app idle with five identities (bench/idle). Target: RSS <= 95 MB, CPU ~0 %. With
   --before-tree DIR (a checkout of an older commit), the same for it.
4. Costs as a setup grows to 500 contexts and identities (bench/scale, issue 33): status, the
   tray's tick and idle CPU, window and Diagnostics open, doctor, secure, the refresh burst,
   each with its budget. With --before-tree DIR, that tree too, in the same run.

    make bench-all  (or: python bench/all.py [--before DIR] [--before-tree DIR] [--idle S]
                     [--scale-sizes 1,10,50,200,500])
"""

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(title: str, cmd: list[str]) -> None:
    print(f"\n== {title}", flush=True)
    subprocess.run(cmd, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--installed", type=Path, help="dir of the packaged programs")
    parser.add_argument("--before", type=Path, help="an older bundle to compare in the same run")
    parser.add_argument("--before-tree", type=Path, help="an older source tree for the idle bench")
    parser.add_argument("--idle", default="60", help="idle seconds (default 60)")
    parser.add_argument("-n", default="30", help="rounds for the hot path (default 30)")
    parser.add_argument(
        "--scale-sizes", default="1,10,50,200,500", help="N for bench/scale (default 1,...,500)"
    )
    args = parser.parse_args()
    py = sys.executable
    bench = ROOT / "bench"
    where = args.installed or next(
        d
        for d in (Path("/usr/bin"), ROOT / "build" / "dist" / "kubetray")
        if (d / "kubetray").exists()
    )
    dev = ROOT / ".venv" / "bin" / "kubetray-exec"  # the development launcher (Python)
    compare = ["--compare", str(dev)] if dev.exists() else []
    if args.before:
        compare += ["--compare", str(args.before / "kubetray-exec")]
    _run(
        "packaged helper" + (f" (compare: {args.before}, before)" if args.before else ""),
        [py, str(bench / "installed_helper.py"), str(where), "-n", args.n, *compare],
    )
    helpers = [str(where / "kubetray-exec"), str(ROOT / ".venv" / "bin" / "kubetray-exec")]
    if args.before:
        helpers.append(str(args.before / "kubetray-exec"))
    _run("agent first start", [py, str(bench / "agent_start.py"), *helpers])
    _run("app idle (this tree)", [py, str(bench / "idle.py"), "--idle", args.idle])
    if args.before_tree:
        _run(
            f"app idle (before: {args.before_tree})",
            [py, str(args.before_tree / "bench" / "idle.py"), "--idle", args.idle],
        )
    before = ["--before-tree", str(args.before_tree)] if args.before_tree else []
    _run(
        "scale" + (f" (compare: {args.before_tree}, before)" if args.before_tree else ""),
        [py, str(bench / "scale.py"), "--sizes", args.scale_sizes, *before],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
