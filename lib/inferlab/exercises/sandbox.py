"""Run untrusted code in a throwaway bubblewrap sandbox, with limits and a deadline, and read back what it says.

The grader runs each student notebook (the worker that drives nbclient, and the kernel) through
``run``. ``bwrap_command`` builds the sandbox; what it holds and why:

- namespaces: user, pid, network, IPC and UTS (cgroup where possible). The code runs as uid and gid
  ``SANDBOX_UID`` (65534, nobody) without capabilities, sees a fresh ``/proc`` with only its own processes,
  has no network but loopback, and starts a new session. Its pid namespace dies with its first process
  (the worker) and with the grader (``--die-with-parent``): nothing it starts outlives it.
- files: the system (``/usr``, ``/etc``), the Python installation, the virtual environment, the library
  and its data are mounted read-only at their own paths; ``/tmp`` is a fresh, size-limited tmpfs and the
  only writable place. Files the caller names (the submission, a stub over a module) are mounted read-only.
  Nothing else exists inside: not other submissions, not the output folder, not the grader's files.
- limits (``prlimit``, applied inside the sandbox): address space and CPU time per process, tasks
  (processes and threads: RLIMIT_NPROC counts per user namespace, so one sandbox cannot starve another),
  file size, open files, no core dumps. ``run`` kills the whole sandbox at its deadline, and reads at
  most ``Limits.result_bytes`` of its result and the tail of its error output.
- results: the command writes its result on a pipe whose descriptor number is in ``$SANDBOX_RESULT_FD``,
  not on stdout (which goes nowhere): output a student's code prints cannot be taken for the result.

Run as root (as in a container), ``bwrap --unshare-user`` would map the sandbox's uid to root outside,
where RLIMIT_NPROC does not apply and files are root's. So the grader makes the user namespace itself
(``_user_namespace``: inside uid 0 is root, 65534 is nobody outside too), bwrap sets up the mounts as that
namespace's root, and ``setpriv`` drops to 65534 before anything else runs. As any other user, bwrap
makes the namespace and maps 65534 inside to that user outside.

Where no sandbox can be made (no bwrap, no user namespaces), ``unavailable`` says why in one line.
``run(..., confined=False)`` runs the command without a sandbox (limits and deadline still apply) for a
grader told ``--no-sandbox``. ``run_folder`` gives each run a private folder that the next run removes
if its grader was killed.
"""

from __future__ import annotations

import fcntl
import functools
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SANDBOX_UID", "RESULT_FD_ENV", "OWNER_ENV", "PRIVATE_ENV", "PYTHON",
           "Limits", "Outcome", "SandboxUnavailable", "bwrap_command", "run",
           "unavailable", "run_folder", "runs_root", "python_paths"]

SANDBOX_UID = 65534  # nobody
RESULT_FD_ENV = "SANDBOX_RESULT_FD"
OWNER_ENV = "SANDBOX_OWNER"  # the pid of the process that made the sandbox: tells one grader's sandboxes from another's
#: Variables of the grader's environment an unconfined command never inherits (the variants' secret).
PRIVATE_ENV = ("INFERLAB_GRADE_SECRET",)
PYTHON = os.path.abspath(sys.executable)  # normalised: a path through a folder the sandbox lacks would not resolve
_SYSTEM = (Path("/usr"), Path("/etc"))
_TOP_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # symlinks into /usr on merged-/usr systems
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/.mpl",
        "IPYTHONDIR": "/tmp/.ipython", "JUPYTER_PLATFORM_DIRS": "1", "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made on this machine; the message says why in one line."""


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use. Memory and CPU time are per process; tasks count processes and threads."""

    memory_bytes: int = 4 << 30
    tasks: int = 128
    cpu_s: int = 600
    file_bytes: int = 64 << 20
    open_files: int = 1024
    tmp_bytes: int = 256 << 20
    result_bytes: int = 16 << 20
    stderr_bytes: int = 4096  # the tail kept

    def prlimit(self, tasks: bool = True) -> list[str]:
        """The ``prlimit`` command line that applies these limits (``tasks``: that one too) to the command after it."""
        lim = {"as": self.memory_bytes, "cpu": self.cpu_s, "fsize": self.file_bytes, "nofile": self.open_files,
               "core": 0, **({"nproc": self.tasks} if tasks else {})}
        return ["prlimit", *(f"--{k}={v}:{v}" for k, v in lim.items()), "--"]


@dataclass(frozen=True)
class Outcome:
    """How a sandboxed command ended and what it said."""

    returncode: int | None  # None when it was killed at its deadline
    result: bytes  # what it wrote on its result pipe (at most Limits.result_bytes)
    stderr: str  # the end of its error output
    timed_out: bool = False
    too_large: bool = False  # it wrote more than Limits.result_bytes: killed, result cut


def python_paths() -> list[Path]:
    """The running interpreter's installation and virtual environment: what a Python command needs to start."""
    return [Path(p) for p in dict.fromkeys((sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix))]


def _ro_binds(paths: Sequence[Path]) -> list[Path]:
    """Existing folders to mount read-only, without those inside another one (mounted with it)."""
    out: list[Path] = []
    for p in sorted({Path(os.path.abspath(p)) for p in paths if Path(p).exists()}, key=lambda p: len(p.parts)):
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def bwrap_command(argv: Sequence[str], *, binds: Sequence[Path] = (), files: Mapping[Path, Path] | None = None,
                  limits: Limits = Limits(), env: Mapping[str, str] | None = None, userns_fd: int | None = None,
                  cwd: str = "/tmp") -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` in a fresh sandbox (see the module's docstring).

    ``binds``: folders mounted read-only at their own paths besides the system (``/usr``, ``/etc``).
    ``files``: target path inside -> source path outside, mounted read-only after the binds (so a file can
    cover one of a bound folder's). ``env``: the whole environment besides the defaults (nothing else is
    inherited). ``userns_fd``: a user namespace made by ``_user_namespace`` (when running as root); without
    it bwrap makes one and maps ``SANDBOX_UID`` inside to the caller's uid outside.
    """
    cmd = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try"]
    if userns_fd is None:
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        drop: list[str] = []
    else:  # bwrap sets up as this namespace's root, setpriv drops to SANDBOX_UID before the command runs
        cmd += ["--userns", str(userns_fd), "--uid", "0", "--gid", "0", "--cap-drop", "ALL",
                "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        drop = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--"]
    for d in _SYSTEM:
        cmd += ["--ro-bind", str(d), str(d)]
    for name in _TOP_LINKS:
        top = Path("/") / name
        if top.is_symlink():
            cmd += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            cmd += ["--ro-bind", str(top), str(top)]
    # the fresh /tmp first: a folder bound below it (a checkout or a virtual environment under /tmp) then shows
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    folders = [p for p in _ro_binds([*binds]) if not any(p == s or s in p.parents for s in _SYSTEM)]
    # bwrap 0.8 makes missing parents of a mount point mode 0700, closed to the sandbox's uid: make them first
    inside = [*_SYSTEM, *folders]
    parents = dict.fromkeys(a for t in [*folders, *map(Path, files or {})] for a in reversed(Path(t).parents)
                            if a not in (Path("/"), Path("/tmp")) and not any(a == q or q in a.parents for q in inside))
    for a in parents:
        cmd += ["--perms", "0755", "--dir", str(a)]
    for p in folders:
        cmd += ["--ro-bind", str(p), str(p)]
    for target, source in (files or {}).items():
        cmd += ["--ro-bind", str(source), str(target)]
    cmd += ["--clearenv"]
    for k, v in {**_ENV, **(env or {})}.items():
        cmd += ["--setenv", k, v]
    cmd += ["--chdir", cwd, "--", *drop, *limits.prlimit(), *argv]
    return cmd


def _user_namespace() -> int:
    """(As root.) A new user namespace where uid/gid 0 are root and SANDBOX_UID is SANDBOX_UID outside; its fd.

    bwrap cannot map an unprivileged uid outside when it runs as root, so a helper (``unshare --user``)
    enters a fresh namespace and this process, root outside, writes its maps. The namespace lives as long
    as the returned descriptor or a process inside it.
    """
    helper = subprocess.Popen(["unshare", "--user", "cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        own, deadline = os.readlink("/proc/self/ns/user"), time.monotonic() + 10
        while True:
            try:
                if os.readlink(f"/proc/{helper.pid}/ns/user") != own:
                    break
            except OSError:
                pass
            if helper.poll() is not None or time.monotonic() > deadline:
                err = helper.stderr.read().decode(errors="replace").strip() if helper.poll() is not None else ""
                raise SandboxUnavailable(f"cannot make a user namespace: {err or 'unshare --user did not start'}")
            time.sleep(0.0005)
        for kind in ("uid", "gid"):
            with open(f"/proc/{helper.pid}/{kind}_map", "w") as f:
                f.write(f"0 0 1\n{SANDBOX_UID} {SANDBOX_UID} 1\n")
        return os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        helper.kill()
        helper.wait()
        for stream in (helper.stdin, helper.stderr):
            stream.close()


def run(argv: Sequence[str], *, deadline_s: float, binds: Sequence[Path] = (),
        files: Mapping[Path, Path] | None = None, limits: Limits = Limits(), env: Mapping[str, str] | None = None,
        confined: bool = True, cwd: Path | None = None) -> Outcome:
    """Run ``argv`` in a sandbox for at most ``deadline_s`` seconds; return its result pipe's bytes and stderr tail.

    The result pipe is read with a byte cap and the deadline, whatever the command or its children do
    (hold stdout open, never exit, write without end); at the deadline or over the cap the sandbox is
    killed, and with it everything inside. ``confined=False`` runs ``argv`` directly (in ``cwd``), in a
    new session that is killed at the end, with the same limits except the task count (which counts all
    of the user's processes outside a user namespace).
    """
    read_fd, write_fd = os.pipe()
    os.set_inheritable(read_fd, False)
    userns_fd = None
    try:
        if confined:
            if os.geteuid() == 0:
                userns_fd = _user_namespace()
            cmd = bwrap_command(argv, binds=binds, files=files, limits=limits, userns_fd=userns_fd,
                                env={**(env or {}), RESULT_FD_ENV: str(write_fd), OWNER_ENV: str(os.getpid())})
            child_env, child_cwd = None, None
        else:
            cmd = [*limits.prlimit(tasks=False), *argv]
            child_env = {**{k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}, **(env or {}),
                         RESULT_FD_ENV: str(write_fd), OWNER_ENV: str(os.getpid())}
            child_cwd = cwd
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                pass_fds=[write_fd] + ([userns_fd] if userns_fd is not None else []),
                                start_new_session=True, env=child_env, cwd=child_cwd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
        if userns_fd is not None:
            os.close(userns_fd)
    return _collect(proc, read_fd, time.monotonic() + deadline_s, limits, confined)


def _collect(proc: subprocess.Popen, read_fd: int, deadline: float, limits: Limits, confined: bool) -> Outcome:
    """Read the result pipe and stderr until the result is complete or the deadline; end the sandbox."""
    assert proc.stderr is not None
    result, err = bytearray(), bytearray()
    too_large = False
    sel = selectors.DefaultSelector()
    sel.register(read_fd, selectors.EVENT_READ)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ)
    result_open = True
    try:
        while result_open and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if key.fd == read_fd:
                    if not chunk:
                        result_open = False
                    elif len(result) + len(chunk) > limits.result_bytes:
                        too_large, result_open = True, False
                    else:
                        result += chunk
                elif chunk:
                    err = (err + chunk)[-limits.stderr_bytes:]
                else:
                    sel.unregister(key.fd)
        timed_out = result_open
        try:  # the result is in: the command exits (and the sandbox with it) at once; else it is killed
            proc.wait(timeout=0 if (timed_out or too_large) else max(0.0, min(5.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pass
        if proc.returncode is None:
            _kill(proc, confined)
            proc.wait()
            if not too_large and not result_open:
                timed_out = False  # the result came; only the exit was slow
        return Outcome(None if timed_out else proc.returncode, bytes(result[:limits.result_bytes]),
                       err.decode("utf-8", errors="replace"), timed_out, too_large)
    finally:
        sel.close()
        os.close(read_fd)
        proc.stderr.close()
        if not confined:
            _kill(proc, confined)


def _kill(proc: subprocess.Popen, confined: bool) -> None:
    """Kill the sandbox (its pid namespace dies with bwrap's child) or, unconfined, the command's session."""
    try:
        if confined:
            proc.kill()
        else:
            os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass


@functools.lru_cache(maxsize=None)
def unavailable() -> str | None:
    """Why no sandbox can be made here (one line), or None when ``run`` works: it starts a sandbox once."""
    root = os.geteuid() == 0
    for tool in ["bwrap", "prlimit"] + (["unshare", "setpriv"] if root else []):
        if shutil.which(tool) is None:
            package = "bubblewrap" if tool == "bwrap" else "util-linux"
            return f"{tool} is not installed (Debian package {package})"
    try:
        out = run([PYTHON, "-c", f"import os; os.write(int(os.environ[{RESULT_FD_ENV!r}]), b'ok')"],
                  deadline_s=30, binds=python_paths())
    except (OSError, SandboxUnavailable) as err:
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    if out.result != b"ok":
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        return f"bwrap cannot make a sandbox here: {lines[-1] if lines else f'exit status {out.returncode}'}"
    return None


def runs_root() -> Path:
    """The folder under the system's temporary folder that holds one folder per grading run."""
    return Path(tempfile.gettempdir()) / "inferlab-grade"


@contextmanager
def run_folder() -> Iterator[Path]:
    """A private folder for one run, removed at its end; first removes the folders of runs that were killed.

    Each run holds a lock on ``<folder>/.lock`` while it lives; the kernel drops the lock when the
    process dies, even by SIGKILL, so a folder whose lock is free belongs to no live run.
    """
    root = runs_root()
    root.mkdir(mode=0o700, exist_ok=True)
    for old in root.glob("run-*"):
        try:
            with open(old / ".lock") as held:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(old, ignore_errors=True)
        except OSError:  # locked (a live run), or not a run's folder
            continue
    name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fresh = root / f"new-{name}"
    fresh.mkdir(mode=0o755)
    lock = open(fresh / ".lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    folder = fresh.rename(root / f"run-{name}")  # appears under its run- name already locked
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        lock.close()
