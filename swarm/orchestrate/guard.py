"""The guardian of one server command: `python -I -S guard.py GRACE_S PARENT NOTE -- CMD...`.

A serve command may start its server and exit (`nohup vllm serve ... &`, a wrapper that double-forks
or calls setsid), or ignore SIGTERM; and the parent-death signal the swarm's children ask for
(processes.py's die_with_parent) reaches the direct child only. So a server command runs under this
process, which:

- is the subreaper of all it starts (`PR_SET_CHILD_SUBREAPER`): every orphaned descendant, a daemon
  or a setsid'd one included, becomes its child, so none escapes the tree below it;
- lives while anything of that tree lives: a serve command that exits 0 while what it started still
  runs is followed (a line in the log and in NOTE says so), and the guardian exits with the serve
  command's code once nothing is left; one that exits with another code failed: what it left is
  stopped (below) at once, so its configuration fails now, not at the /health deadline;
- on SIGTERM, SIGINT or SIGHUP, or when PARENT is no longer its parent (it asks for SIGTERM at its
  parent's death and also checks every POLL_S: the signal goes to the child of the thread that
  forked, and is lost when the parent died before it was asked for), sends SIGTERM to every
  descendant, SIGKILL to all still there GRACE_S later (again and again until none is left, so a
  process forked meanwhile goes too), reaps them and exits.

Run by path with `-I -S`, importing nothing but the standard library, so it starts in a few tens of
milliseconds. Descendants are found by scanning /proc/*/stat (`/proc/PID/task/*/children` needs a
kernel option not every kernel has). Linux only: without prctl it exits 125 at once.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
POLL_S = 0.2  # how often the guardian checks its parent and reaps
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them; the server gets the defaults
NO_SUBREAPER = 125
NOT_STARTED = 127


def descendants(root: int) -> list[int]:
    """Every living process below `root` (children first), from /proc/*/stat's parent pids."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # it exited meanwhile
            continue
        ppid = int(stat.rpartition(b")")[2].split()[1])  # after "pid (comm) state"
        children.setdefault(ppid, []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Tree:
    """What the guardian started: the serve command's pid and, once it has exited, its code."""

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.code: int | None = None

    def reap(self) -> bool:
        """Every exited child reaped (an orphan re-parented here included); False when none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.leader:
                self.code = os.waitstatus_to_exitcode(status)
                self.code = self.code if self.code >= 0 else 128 - self.code


def stop(tree: Tree, grace_s: float) -> None:
    """SIGTERM to every descendant, SIGKILL to every one still there after `grace_s`, all reaped."""
    signal_all(descendants(os.getpid()), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while tree.reap():
        left = deadline - time.monotonic()
        if left <= 0:
            signal_all(descendants(os.getpid()), signal.SIGKILL)
        signal.sigtimedwait({signal.SIGCHLD}, min(POLL_S, max(left, POLL_S / 4)))


def note(path: str, tree: Tree) -> None:
    line = (
        f"its serve command exited with code {tree.code} and left processes running: "
        "followed as the server, stopped with it"
    )
    print(f"swarm guard: {line}", flush=True)
    if path:
        with open(path, "w") as f:
            f.write(line + "\n")


def guard(grace_s: float, parent: int, note_path: str, cmd: list[str]) -> int:
    """Run `cmd` and follow all it starts until nothing is left (its exit code) or a stop."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS | {signal.SIGCHLD})
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    except (OSError, AttributeError) as e:
        print(f"swarm guard: cannot follow the server's processes: {e}", file=sys.stderr, flush=True)
        return NO_SUBREAPER
    if os.getppid() != parent:  # the command that started it is gone already: start nothing
        return 128 + signal.SIGTERM
    try:
        leader = os.posix_spawnp(cmd[0], cmd, os.environ, setsigmask=(), setsigdef=RESTORED)
    except OSError as e:
        print(f"swarm guard: could not start {cmd[0]}: {e.strerror or e}", file=sys.stderr, flush=True)
        return NOT_STARTED
    tree, noted = Tree(leader), False
    while os.getppid() == parent:
        got = signal.sigtimedwait(STOP_SIGNALS | {signal.SIGCHLD}, POLL_S)
        if got is not None and got.si_signo in STOP_SIGNALS:
            break
        if not tree.reap():
            return tree.code if tree.code is not None else 0
        if tree.code is not None and not noted:
            if tree.code != 0:  # a failed start (a crashed server's leftover): not a server to follow
                print(
                    f"swarm guard: its serve command exited with code {tree.code}: stopping what it left",
                    flush=True,
                )
                break
            note(note_path, tree)
            noted = True
    stop(tree, grace_s)
    return tree.code if tree.code is not None else 128 + signal.SIGTERM


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: guard.py GRACE_S PARENT_PID NOTE_PATH -- CMD...", file=sys.stderr)
        return 2
    return guard(float(argv[0]), int(argv[1]), argv[2], argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
