"""Hostile programs against ugttt.sandbox: each must end in a failed RunResult with a clear reason, within the
wall-clock time its budget allows (the CPU clock's backstop, WALL_BACKSTOP budgets) plus 2 s, while the caller keeps running; afterwards no process of the sandbox is left and no file outside the
sandbox changed. Cases about *scoring* (NaN, wrong types, forged values) check here that only plain data crosses
back; the score-level verdicts live in the tasks tests."""
import json, math, os, re, resource, signal, socket, stat, subprocess, sys, tempfile, threading, time, uuid
from pathlib import Path

import numpy as np
import pytest

import ugttt.sandbox.confine as I
import ugttt.sandbox as S
import ugttt.sandbox.cgroups as C
import ugttt.sandbox.worker as Wk
from ugttt.sandbox import Sandbox

pytestmark = pytest.mark.sandbox   # not in test-fast (pytest.ini): hostile programs run to their budgets

ROOT = Path(__file__).resolve().parents[1]
MARK = f'ugttt_adv_{uuid.uuid4().hex[:10]}'        # every file a hostile program tries to create carries this name
HOME = Path(os.path.expanduser('~'))
BUDGET = 1.0
MAX_OUT = 2000
MAX_RESULT = 2**20

# (name, source, expected error (regex, matched from the start), budget)
CASES = [
    ('infinite_loop', 'def run():\n    while True: pass', r'timeout: exceeded 1 s CPU budget$', BUDGET),
    ('sleep_past_budget', 'import time\ndef run():\n    time.sleep(1000)', r'timeout: still running after 3 s, its wall-clock backstop', BUDGET),
    # CPU time hidden in children that a parent ignoring SIGCHLD never reaps (the kernel reaps them, their time uncounted):
    # the backstop still ends it
    ('cpu_hidden_in_unreaped_children', 'import os, signal, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\ndef run():\n'
     '    while True:\n        if os.fork() == 0:\n            t = time.process_time()\n            while time.process_time() - t < 0.2: pass\n'
     '            os._exit(0)\n        time.sleep(0.25)', r'timeout', BUDGET),
    ('catch_sigterm_sigalrm', 'import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP):\n'
     '    signal.signal(s, lambda *a: None)\nsignal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)\n'
     'def run():\n    while True: pass', r'timeout', BUDGET),
    ('fork_bomb', 'import os\ndef run():\n    while True:\n        try: os.fork()\n        except OSError: pass',
     r'timeout', BUDGET),
    ('fork_bomb_children_loop', 'import os\ndef run():\n    for _ in range(10000):\n        try:\n            if os.fork() == 0:\n'
     '                while True: pass\n        except OSError: pass\n    while True: pass', r'timeout', BUDGET),
    ('daemon_escape', 'import os, time\ndef run():\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n'
     '            while True: time.sleep(0.01)\n        os._exit(0)\n    time.sleep(1000)', r'timeout', BUDGET),
    ('memory_bomb_list', 'def run():\n    x = []\n    while True: x.append(bytearray(10**7))', r'memory limit \(256 MB\) exceeded', 5.0),
    ('memory_bomb_numpy', 'import numpy as np\ndef run():\n    return np.ones((10**5, 10**5)).sum()', r'memory limit \(256 MB\) exceeded', BUDGET),
    ('memory_bomb_mmap', 'import mmap\ndef run():\n    m = mmap.mmap(-1, 8 * 2**30)\n    m[:] = b"x" * len(m)', r'exception: OSError|memory limit', BUDGET),
    ('deep_recursion', 'def f(n): return f(n + 1)\ndef run(): return f(0)', r'exception: RecursionError', BUDGET),
    ('c_stack_overflow', 'import sys\nsys.setrecursionlimit(10**8)\ndef run():\n    x = []\n    for _ in range(10**6): x = [x]\n    return repr(x)',
     r'crashed: killed by signal SIGSEGV$', 5.0),
    ('segfault_ctypes', 'import ctypes\ndef run(): return ctypes.string_at(0)', r'crashed: killed by signal SIGSEGV$', BUDGET),
    ('abort', 'import os\ndef run(): os.abort()', r'crashed: killed by signal SIGABRT$', BUDGET),
    ('kill_self', 'import os, signal\ndef run(): os.kill(os.getpid(), signal.SIGKILL)', r'crashed: killed by signal SIGKILL$', BUDGET),
    ('os_exit_0', 'import os\ndef run(): os._exit(0)', r'exited with status 0 before returning a result', BUDGET),
    ('os_exit_3_at_import', 'import os\nos._exit(3)\ndef run(): return 1', r'exited with status 3 before returning a result$', BUDGET),
    ('sys_exit_0', 'import sys\ndef run(): sys.exit(0)', r'the program called sys.exit\(0\)$', BUDGET),
    ('sys_exit_in_finally', "def run():\n    try: return 1\n    finally: raise SystemExit('bye')", r"the program called sys.exit\('bye'\)$", BUDGET),
    ('kill_the_zygote', 'import os, signal\ndef run():\n    os.kill(os.getppid(), signal.SIGKILL)\n    while True: pass',
     r'exception: PermissionError|sandbox worker lost|timeout', BUDGET),
    ('threads_left_running', 'import threading, time\ndef spin():\n    while True: print("spin")\n'
     'def run():\n    for _ in range(4): threading.Thread(target=spin).start()\n    time.sleep(0.05)\n    raise RuntimeError("left threads behind")',
     r'exception: RuntimeError: left threads behind$', BUDGET),
    ('huge_stdout', 'import sys\ndef run():\n    while True: sys.stdout.write("x" * 65536)', r'timeout', BUDGET),
    ('write_package_dir', f"def run():\n    open({str(ROOT / 'ugttt' / (MARK + '.py'))!r}, 'w').write('evil = 1')",
     r'exception: (FileNotFoundError|PermissionError|OSError)', BUDGET),
    ('write_run_dir', f"def run():\n    open({str(Path.cwd() / MARK)!r}, 'w').write('x')", r'exception: (FileNotFoundError|PermissionError|OSError)', BUDGET),
    ('write_home', f"import os\ndef run():\n    open(os.path.join({str(HOME)!r}, {MARK!r}), 'w').write('x')",
     r'exception: (FileNotFoundError|PermissionError|OSError)', BUDGET),
    ('write_venv', f"import numpy, os\ndef run():\n    open(os.path.join(os.path.dirname(numpy.__file__), {MARK!r}), 'w').write('x')",
     r'exception: OSError: \[Errno 30\] Read-only file system', BUDGET),
    ('write_sandbox_root', f"def run():\n    open('/{MARK}', 'w').write('planted for the next program')", r'exception: (PermissionError|OSError)', BUDGET),
    ('write_proc_sys', "def run():\n    open('/proc/sys/vm/drop_caches', 'w').write('3')", r'exception: (PermissionError|OSError)', BUDGET),
    ('read_shadow', "def run(): return open('/etc/shadow').read()", r'exception: FileNotFoundError', BUDGET),
    ('read_ssh_keys', f"import os\ndef run(): return os.listdir(os.path.join({str(HOME)!r}, '.ssh'))", r'exception: (FileNotFoundError|PermissionError)', BUDGET),
    ('read_repo', f"def run(): return open({str(ROOT / 'README.md')!r}).read()", r'exception: (FileNotFoundError|PermissionError)', BUDGET),
    ('read_zygote_memory', "import os\ndef run(): return open(f'/proc/{os.getppid()}/mem', 'rb').read(16)", r'exception: PermissionError', BUDGET),
    ('network_external', "import socket\ndef run(): socket.create_connection(('1.1.1.1', 80), timeout=5)", r'exception: OSError: \[Errno 101\]', BUDGET),
    ('network_dns', "import socket\ndef run(): return socket.getaddrinfo('example.com', 80)", r'exception: (socket.)?gaierror|exception: OSError', BUDGET),
    ('subprocess_detached_then_exit', "import subprocess, os\ndef run():\n    subprocess.Popen(['sleep', '1000'], start_new_session=True)\n    os._exit(0)",
     r'exited with status 0 before returning a result', BUDGET),
    ('exec_replaces_program', "import os\ndef run(): os.execv('/bin/sh', ['sh', '-c', 'sleep 1000'])", r'timeout', BUDGET),
    ('forge_reply_json', 'import json\njson.dumps = lambda *a, **k: \'{"ok": true, "value": \'\ndef run(): return 1', r'malformed result', BUDGET),
    ('forge_reply_fd', 'import os\ndef run():\n    for fd in range(3, 64):\n        try: os.write(fd, b"{\\"ok\\": true, \\"value\\": [1e308")\n'
     '        except OSError: pass\n    os._exit(0)', r'malformed result', BUDGET),
    ('forge_done_byte', 'import os, socket, time\ndef run():\n    for fd in range(3, 64):\n        try: socket.socket(fileno=os.dup(fd)).send(b"d")\n'
     '        except OSError: pass\n    time.sleep(1000)', r'exited with status 0 before returning a result', BUDGET),
    ('setuid_root', 'import os\ndef run(): os.setuid(0)', r'exception: PermissionError', BUDGET),
    ('fill_tmp', "def run():\n    with open('/tmp/fill', 'wb') as f:\n        while True: f.write(b'x' * 2**20)", r'exception: OSError', 5.0),
    ('wrong_entry_name', 'def solve(): return 1', r"entry point 'run' is not defined$", BUDGET),
    ('entry_not_callable', 'run = 5', r"entry point 'run' is not callable$", BUDGET),
    ('syntax_error', 'def run(:\n    return 1', r'syntax error: invalid syntax \(line 1\)$', BUDGET),
    ('lying_object', 'class Liar:\n    def __len__(self): return 26\n    def __iter__(self): return iter([0.5] * 26)\n'
     '    def __float__(self): return 1e9\n    def __array__(self, *a, **k): raise RuntimeError\ndef run(): return Liar()',
     r'return value is not plain data: TypeError: return value contains a program.Liar', BUDGET),
    ('lying_class_attribute', 'class F:\n    __class__ = property(lambda self: float)\n    def __float__(self): return 3.0\ndef run(): return [F()]',
     r'return value is not plain data', BUDGET),
    ('object_ndarray', 'import numpy as np\ndef run(): return np.array([1, {"a": 1}], dtype=object)', r'return value is not plain data: TypeError: ndarray of dtype object', BUDGET),
    ('complex_values', 'def run(): return [1 + 2j]', r'return value is not plain data', BUDGET),
    ('enormous_array', 'import numpy as np\ndef run(): return np.zeros(10**6)', r'return value is not plain data: ValueError: ndarray of 1000000 elements', BUDGET),
    ('enormous_nested_lists', 'def run(): return [[0.123456789] * 1000 for _ in range(1000)]', r'result too large', 5.0),
    ('deeply_nested', 'def run():\n    x = []\n    for _ in range(10000): x = [x]\n    return x', r'return value is not plain data: ValueError: .*nested', BUDGET),
    ('huge_int', 'def run(): return 10 ** 100000', r'return value could not be encoded', BUDGET),
    ('non_str_keys', 'def run(): return {(1, 2): 3}', r'return value is not plain data: TypeError: dict key', BUDGET),
]


# What a case relies on beyond limits: 'fs' (a confining mode's mount namespace), 'net' (a network namespace), 'pidns',
# 'unpriv' (the program is not root), 'nproc' (a process cap). The suite runs in every confining mode this machine has
# (bwrap and mountns); a sandbox lacking a layer skips the cases that need it, never runs them: `kill(-1)` by root
# without a pid namespace would take the whole machine down.
NEEDS = {'fork_bomb': {'nproc'}, 'fork_bomb_children_loop': {'nproc'},
         'setuid_root': {'unpriv'}, 'read_zygote_memory': {'unpriv'}, 'fill_tmp': {'fs'},
         **{c[0]: {'fs'} for c in CASES if c[0].startswith(('write_', 'read_'))},
         **{c[0]: {'net'} for c in CASES if c[0].startswith('network_')}}


def _has(sb) -> set:
    "The containment layers this sandbox really has."
    iso = sb.isolation
    return ({'fs'} if iso in I.CONFINING else set()) | ({'net', 'pidns'} if iso != 'limits' else set()) | \
           ({'unpriv'} if sb.program_uids or os.getuid() != 0 else set()) | ({'nproc'} if sb.processes_capped else set())


def _cgroup_members(tag: str, ignore: frozenset = frozenset()) -> list:
    "Pids in a cgroup whose path contains `tag` (our workers' groups are named w<our pid>-...), except groups in `ignore`."
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit(): continue
        try: groups = _cgroup_paths(Path(f'/proc/{d}/cgroup').read_text(), tag)
        except OSError: continue
        if groups - ignore: out.append(int(d))
    return out


def _sandbox_children() -> set:
    "(pid, args) of our direct children that are a sandbox's bwrap, launcher or zygote."
    out = subprocess.run(['ps', '-o', 'pid=,args=', '--ppid', str(os.getpid())], capture_output=True, text=True).stdout
    return {tuple(l.strip().split(None, 1)) for l in out.splitlines() if '--ugttt-zygote' in l or 'bwrap' in l}


def _cgroup_paths(text: str, tag: str) -> set:
    "The cgroup paths in a /proc/<pid>/cgroup text that contain `tag`."
    return {line.split(':', 2)[2] for line in text.splitlines() if line.count(':') >= 2 and tag in line.split(':', 2)[2]}


def _live_cgroups(tag: str) -> frozenset:
    "Cgroup paths containing `tag` that hold a process now (other sandboxes of this test process, e.g. default_sandbox())."
    found = set()
    for d in os.listdir('/proc'):
        if not d.isdigit(): continue
        try: found |= _cgroup_paths(Path(f'/proc/{d}/cgroup').read_text(), tag)
        except OSError: pass
    return frozenset(found)


def _files_by_sandbox_uid(roots: list, since: float) -> list:
    "Files under `roots` created or changed since `since` by a programs' uid (>= C.UID_BASE) or named with MARK."
    hits = []
    for r in roots:
        for dirpath, dirnames, filenames in os.walk(r):
            dirnames[:] = [d for d in dirnames if d not in ('.git', '.venv', '.pyenv', '.cache', 'proc', 'sys', 'node_modules')]
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                try: st = os.lstat(p)
                except OSError: continue
                if MARK in n or (st.st_uid >= C.UID_BASE and st.st_mtime >= since): hits.append(p)
            if dirpath.count(os.sep) - str(r).count(os.sep) >= 3: dirnames[:] = []
    return hits


def _snapshot() -> dict:
    "Size, mtime and content of files a hostile program would most like to change (the ones it targets above)."
    files = [ROOT / 'README.md', ROOT / 'settings.ini', ROOT / 'ugttt' / '__init__.py', ROOT / 'ugttt' / 'sandbox.py',
             HOME / '.bashrc', HOME / '.profile', Path('/etc/passwd'), Path('/etc/hosts')]
    out = {}
    for f in files:
        try: out[str(f)] = f.read_bytes()            # content only: other processes may rewrite a file unchanged
        except OSError: out[str(f)] = None
    return out


@pytest.fixture(scope='module', params=I.CONFINING)
def sb(request):
    "A sandbox in each confining mode this machine has (the suite runs once per mode)."
    if not I.probe(request.param): pytest.skip(f'isolation {request.param!r} does not work here: {I._PROBE_ERRORS.get(request.param)}')
    t_start, before = time.time(), _snapshot()
    others = _live_cgroups(f'/w{os.getpid()}-')   # sandboxes that earlier tests of this process left open are not ours
    other_kids = _sandbox_children()
    s = Sandbox(workers=2, budget_s=BUDGET, memory_mb=256, max_output_chars=MAX_OUT, max_result_bytes=MAX_RESULT, tmp_mb=64,
                isolation=request.param)
    s.warm()
    yield s
    s.close()
    # nothing of the sandbox left running: no task in our groups, no zygote among our descendants
    time.sleep(0.2)
    if s.cg_bases: assert _cgroup_members(f'/w{os.getpid()}-', ignore=others) == []
    left = _sandbox_children() - other_kids
    assert left == set(), left
    # nothing written outside the sandbox's directories: the repo, $HOME, the host /tmp and our cwd
    hits = _files_by_sandbox_uid([ROOT, HOME, Path('/tmp'), Path.cwd()], t_start)
    assert hits == [], hits
    assert _snapshot() == before


@pytest.mark.parametrize('name,source,expected,budget', CASES, ids=[c[0] for c in CASES])
def test_hostile_program_fails_cleanly(sb, name, source, expected, budget):
    missing = NEEDS.get(name, set()) - _has(sb)
    if missing: pytest.skip(f'{name} needs {sorted(missing)}, which isolation {sb.isolation!r} does not give here')
    sb.warm()
    t = time.monotonic()
    r = sb.run(source, 'run', budget_s=budget)
    wall = time.monotonic() - t
    assert r.ok is False and r.value is None, r
    assert re.match(expected, r.error or ''), f'{name}: {r.error!r}'
    # on the CPU clock: never more CPU time than the budget (plus the zygote's reaction), whatever the machine's load; wall time
    # only bounded loosely (a program starved by load is slower, not cut: its backstop counts idle time only). A fork bomb's
    # processes share the worker's CPU with its zygote, which then sees the budget late: 2.5 s for a 1 s budget once in
    # five suites (mountns, root, an idle machine); the worker's cpu cgroup still holds the whole bomb to `cpus` CPUs.
    react = 2.0 if 'nproc' in NEEDS.get(name, set()) else 0.5
    assert r.cpu_s <= budget * sb.cpus + react, r
    assert r.elapsed_s <= 10 * S.WALL_BACKSTOP * budget and wall <= 10 * S.WALL_BACKSTOP * budget, (r.elapsed_s, wall)
    assert r.timed_out == r.error.startswith('timeout'), r
    assert len(r.stdout) <= MAX_OUT + 200 and len(r.stderr) <= MAX_OUT + 200
    # the caller and the sandbox keep working: a normal program right after succeeds
    assert sb.run('def run(): return [1, 2.5]', 'run').value == [1, 2.5]


def test_there_are_at_least_25_hostile_programs():
    assert len(CASES) >= 25


def test_fork_bomb_hit_the_process_cap(sb):
    "The fork bomb is stopped by the pids cgroup (root) or RLIMIT_NPROC: forks fail, the machine does not notice."
    if not sb.processes_capped: pytest.skip('root unconfined without a pids cgroup: no process cap')
    src = ('import os\ndef run():\n    n = fails = 0\n    while n + fails < 100000:\n        try:\n            if os.fork() == 0:\n'
           '                import time; time.sleep(100)\n            n += 1\n        except OSError: fails += 1; break\n    return [n, fails]')
    r = sb.run(src, 'run', budget_s=20.0)
    assert r.ok, r
    n, fails = r.value
    assert fails == 1 and n < sb.max_procs + 8, r.value          # stopped at the cap, not by the budget


def test_huge_stdout_keeps_the_tail(sb):
    r = sb.run('def run():\n    for i in range(200000): print(i)\n    raise ValueError("end")', 'run', budget_s=5.0)
    assert not r.ok and r.error == 'exception: ValueError: end'
    assert r.stdout.startswith('[... output truncated:') and r.stdout.endswith('199999\n') and len(r.stdout) <= MAX_OUT + 200
    assert 'ValueError: end' in r.stderr                                           # the traceback is kept


def test_loopback_connection_fails_fast_and_reaches_no_host_listener(sb):
    if sb.isolation == 'limits': pytest.skip('no network namespace in the limits mode')
    srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1); srv.settimeout(0.5)
    port = srv.getsockname()[1]
    r = sb.run(f"import socket\ndef run(): socket.create_connection(('127.0.0.1', {port}), timeout=5)", 'run')
    # refused at once (the error says so: a timeout would be TimeoutError); the bound, below the program's 5 s timeout,
    # leaves a loaded machine room
    assert not r.ok and re.match(r'exception: (ConnectionRefusedError|OSError: \[Errno 101\])', r.error) and r.elapsed_s < 4.0, r
    with pytest.raises(socket.timeout): srv.accept()                               # nothing arrived on the host
    srv.close()


def test_no_host_process_is_visible(sb):
    if sb.isolation == 'limits': pytest.skip('no pid namespace in the limits mode')
    r = sb.run("import os\ndef run(): return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())", 'run')
    assert r.ok and len(r.value) <= 4, r.value                  # bwrap's init (not in mountns), the zygote, the program (+ its spare)


def test_monkeypatching_numpy_changes_nothing_outside(sb):
    "A program patches numpy (and would patch a verifier the same way): the parent and the next program see the real one."
    src = ('import numpy as np, builtins\nnp.sum = lambda *a, **k: 0.0\nnp.convolve = lambda *a, **k: np.zeros(1)\n'
           'builtins.max = lambda *a, **k: 0\ndef run(): return [float(np.sum([1, 2, 3])), float(np.convolve([1], [1])[0])]')
    r = sb.run(src, 'run')
    assert r.ok and r.value == [0.0, 0.0]                        # inside its own process the patch works...
    assert np.sum([1, 2, 3]) == 6 and max(1, 2) == 2            # ...but not in the parent, which scores
    for _ in range(sb.workers * 2):                              # nor in any later program on any worker
        r2 = sb.run('import numpy as np\ndef run(): return [int(np.sum([1, 2, 3])), max(1, 2)]', 'run')
        assert r2.value == [6, 2], r2


# top-level names in the sandbox's /tmp that hold read-only interpreter binds (when the venv lives under /tmp)
BOUND_UNDER_TMP = {Path(p).parts[2] for p in I.python_dirs() if p.startswith('/tmp/')}


def test_nothing_persists_between_programs(sb):
    "Files in /tmp, /dev/shm, the work dir, and module state do not reach the next program."
    if not sb.confined: pytest.skip('in an unconfined mode /tmp is the host\'s')
    w = sb.run("import os, sys\ndef run():\n    for p in ['/tmp/persist', 'persist']: open(p, 'w').write('x')\n"
               "    for p in ['/persist', '/work/persist', '/dev/persist']:\n        try: open(p, 'w').write('x')\n        except OSError: pass\n"
               "    try: open('/dev/shm/persist', 'w').write('x')\n    except OSError: pass\n"
               "    import json; json.PERSIST = 1\n    return os.listdir('/tmp')", 'run')
    assert w.ok, w
    for _ in range(sb.workers * 2):
        r = sb.run("import os, json\ndef run(): return [os.listdir('/tmp'), os.listdir('.'), hasattr(json, 'PERSIST'),"
                   " [p for p in ['/dev/shm/persist', '/persist', '/work/persist', '/dev/persist'] if os.path.exists(p)]]", 'run')
        tmp, cwd, attr, planted = r.value
        tmp = sorted(set(tmp) - BOUND_UNDER_TMP)   # an interpreter bound under /tmp (a checkout there) stays, read-only
        assert tmp == ['job'] and cwd == ['program.py'] and not attr and not planted, r.value


def test_scoring_cases_cross_back_as_plain_data(sb):
    "NaN/inf, tuples, ndarray subclasses, numpy scalars: what arrives is plain data; judging it is the scorer's job."
    src = ('import numpy as np\nclass Sub(np.ndarray):\n    def tolist(self): return "forged"\n    def __iter__(self): return iter([9.0])\n'
           'def run(): return (np.array([np.nan, np.inf, -np.inf]), np.zeros(3).view(Sub), np.float32(0.5), np.int64(7),'
           ' np.array([[1, 2]]), (1, (2, 3)), {"h": [True, None]})')
    r = sb.run(src, 'run')
    assert r.ok, r
    v = r.value
    assert math.isnan(v[0][0]) and v[0][1:] == [math.inf, -math.inf]
    assert v[1:] == [[0.0, 0.0, 0.0], 0.5, 7, [[1, 2]], [1, [2, 3]], {'h': [True, None]}]

    def plain(x):
        t = type(x)
        if t in (bool, int, float, str, type(None)): return True
        if t is list: return all(plain(y) for y in x)
        if t is dict: return all(type(k) is str and plain(y) for k, y in x.items())
        return False
    assert plain(v)


def test_wrong_shapes_cross_back_unchanged(sb):
    "A wrong shape is not the sandbox's business: it arrives as nested lists for the scorer to reject."
    r = sb.run('import numpy as np\ndef run(): return np.ones((2, 3, 1)), np.arange(5), "26 circles"', 'run')
    assert r.ok and r.value == [[[[1.0]] * 3] * 2, [0, 1, 2, 3, 4], '26 circles']


# ---------------------------------------------------------------------------------------------------------------------
# Programs against their worker and against each other. Each case is one way a program could poison its worker
# (its zygote, its limits, its kernel state) or a program of another worker; after each, valid programs run on every
# worker of the same sandbox, as they would in training, and must not pay for it.

VALID = 'def run(): return [1, 2.5]'


def _valid_everywhere(sb, src: str = VALID, expect=(1, 2.5), budget: float = 5.0) -> list:
    "Run a valid program twice per worker (so each worker gets one); all must succeed with `expect`; their results."
    rs = [sb.run(src, 'run', budget_s=budget) for _ in range(2 * sb.workers)]
    for r in rs: assert r.ok and r.value == list(expect), r
    return rs


def _needs(sb, *layers):
    "Skip, saying why, when this machine lacks a layer the test relies on."
    if 'uid' in layers and not sb.program_uids: pytest.skip('programs share their zygote\'s uid here (needs root and a confining mode)')
    if 'seccomp' in layers and sb.seccomp is None: pytest.skip('no seccomp filter on this architecture')
    if 'cpu' in layers and 'cpu' not in sb.cg_bases: pytest.skip('no writable cpu cgroup here')


def test_kill_everything_reaches_only_the_programs_own_processes(sb):
    "kill(-1) signals every process the caller may signal: under its worker's uid, that is only the program's own."
    _needs(sb, 'uid')
    r = sb.run('import os, signal, time\ndef run():\n    if os.fork() == 0: time.sleep(100)\n    time.sleep(0.05)\n'
               '    os.kill(-1, signal.SIGKILL)\n    return [os.waitpid(-1, 0)[1]]', 'run')
    assert r.ok and r.value == [signal.SIGKILL], r                          # its own child died, nothing else
    _valid_everywhere(sb)


LIMIT_THE_ZYGOTE = '''import os, resource
def run():
    z, out = os.getppid(), []
    for lim, val in ((resource.RLIMIT_AS, 2**26), (resource.RLIMIT_CPU, 1), (resource.RLIMIT_NPROC, 1)):
        try: resource.prlimit(z, lim, (val, val)); out.append(True)
        except OSError: out.append(False)
    return out'''
# what a later program sees: the CPU limit it inherited, and whether it can still use 100 MB and 8 threads
LIMITS_SEEN = '''import resource, threading, numpy as np
def run():
    ts = [threading.Thread(target=lambda: None) for _ in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    return [list(resource.getrlimit(resource.RLIMIT_CPU)), float(np.ones(100 * 2**20 // 8).sum()) > 0]'''


def test_a_program_cannot_limit_its_zygote(sb):
    "Finding 1: prlimit(getppid(), RLIMIT_AS / RLIMIT_CPU / RLIMIT_NPROC) fails: the zygote runs under another uid."
    _needs(sb, 'uid')
    r = sb.run(LIMIT_THE_ZYGOTE, 'run')
    assert r.ok and r.value == [False, False, False], r
    cpu = S.budget_limits(60.0)['cpu_limit_s']                   # a later program's CPU limit is its own budget's: 61 s
    _valid_everywhere(sb, LIMITS_SEEN, ([cpu, cpu], True), budget=60.0)


def test_a_zygote_limited_anyway_is_replaced_before_the_next_program():
    "Finding 1 where programs share the zygote's uid (the limits fallback, as root): the zygote's health check sees it."
    with Sandbox(workers=1, budget_s=5.0, memory_mb=256, isolation='limits') as s:
        s.warm(); before = s.worker_pids()
        r = s.run(LIMIT_THE_ZYGOTE.replace('2**26), (', '2**40), (').replace('RLIMIT_CPU, 1)', 'RLIMIT_CPU, 50)')
                  .replace('(resource.RLIMIT_NPROC, 1)', '(resource.RLIMIT_NOFILE, 512)'), 'run')
        assert r.ok and r.value == [True, True, True], r               # root: allowed, so it happened
        r = s.run('import os\ndef run():\n    os.setpriority(os.PRIO_PROCESS, os.getppid(), 5)\n    return 1', 'run')
        assert r.ok, r
        cpu = S.budget_limits(60.0)['cpu_limit_s']               # its own budget's 61 s, not the zygote's 50
        _valid_everywhere(s, LIMITS_SEEN, ([cpu, cpu], True), budget=60.0)
        assert s.worker_pids() != before                               # replaced, transparently


def _zygote_of(sb) -> int:
    "Host pid of the (single) worker's zygote: the interpreter whose parent is not a zygote (bwrap's init, or the mountns launcher)."
    pids, todo = [], list(sb.worker_pids())
    while todo:
        p = todo.pop(); pids.append(p)
        for t in os.listdir(f'/proc/{p}/task'):
            try: todo += [int(k) for k in Path(f'/proc/{p}/task/{t}/children').read_text().split()]
            except OSError: pass
    for p in pids:
        try:
            argv = Path(f'/proc/{p}/cmdline').read_bytes().split(b'\0')
            parent = int(Path(f'/proc/{p}/stat').read_text().rsplit(')', 1)[1].split()[1])
            pargv = Path(f'/proc/{parent}/cmdline').read_bytes().split(b'\0')
        except (OSError, ValueError, IndexError): continue
        if (b'--ugttt-zygote' in argv and b'--ugttt-launch' not in argv and os.path.basename(argv[0]) != b'bwrap'
                and pargv != argv):                              # bwrap's own argv ends in the zygote's; a spare has its argv
            return p
    raise AssertionError('no zygote found')


def test_a_stopped_zygote_cannot_stretch_a_programs_time(sb):
    "Finding 2: a program stops its zygote, computes past its budget, returns, a helper resumes the zygote: a timeout."
    r = sb.run('import os, signal, time\ndef run():\n    z = os.getppid()\n    try: os.kill(z, signal.SIGSTOP)\n'
               '    except PermissionError: pass\n    if os.fork() == 0:\n        time.sleep(1.4)\n'
               '        try: os.kill(z, signal.SIGCONT)\n        except OSError: pass\n        os._exit(0)\n'
               '    t = time.process_time()\n    while time.process_time() - t < 1.3: pass\n    return 1', 'run', budget_s=1.0)
    assert not r.ok and r.timed_out and r.error.startswith('timeout: exceeded 1 s CPU budget'), r
    _valid_everywhere(sb)
    # and when the zygote really is stopped for a while (here by the test, as root): on the wall clock the caller's own
    # clock decides, on the CPU clock the zygote's count of the program's CPU time, read when it goes on
    if os.getuid() != 0: return
    for clock in ('wall', 'cpu'):
        with Sandbox(workers=1, budget_s=1.0, memory_mb=256, isolation=sb.isolation, budget_clock=clock) as s:
            s.warm()
            z = _zygote_of(s)
            stopper = subprocess.Popen([sys.executable, '-c', f'import os, time, signal\ntime.sleep(0.2)\nos.kill({z}, signal.SIGSTOP)\n'
                                        f'time.sleep(1.6)\nos.kill({z}, signal.SIGCONT)'])
            r = s.run('import time\ndef run():\n    t = time.process_time()\n    while time.process_time() - t < 1.4: pass\n    return 1', 'run')
            stopper.wait()
            assert not r.ok and r.timed_out and r.elapsed_s > 1.0, (clock, r)
            _valid_everywhere(s)
    # a zygote stopped for good: on the CPU clock the caller kills a worker that has stopped keeping time
    with Sandbox(workers=1, budget_s=2.0, memory_mb=256, isolation=sb.isolation) as s:
        s.warm()
        z, silent = _zygote_of(s), Wk.Worker.SILENT_S
        stopper = threading.Timer(0.3, os.kill, (z, signal.SIGSTOP))   # a thread here: no interpreter to start, on time
        try:
            Wk.Worker.SILENT_S = 2.0
            stopper.start()
            r = s.run('def run():\n    while True: pass', 'run')
        finally: Wk.Worker.SILENT_S = silent; stopper.join()
        assert r.timed_out and r.error == 'timeout: the sandbox worker stopped keeping time (killed)' and r.elapsed_s < 5.0, r
        _valid_everywhere(s)


def test_affinity_and_priority_of_the_zygote_are_out_of_reach(sb):
    "Finding 3: sched_setaffinity and setpriority on the zygote fail; later programs keep every CPU, the zygote its priority."
    _needs(sb, 'uid')
    r = sb.run('import os\ndef run():\n    out = []\n    for f in (lambda: os.sched_setaffinity(os.getppid(), {0}),\n'
               '              lambda: os.setpriority(os.PRIO_PROCESS, os.getppid(), 19)):\n'
               '        try: f(); out.append(True)\n        except OSError: out.append(False)\n    return out', 'run')
    assert r.ok and r.value == [False, False], r
    cpus, nice = sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0)   # the zygote has ours; a program nice 19
    _valid_everywhere(sb, 'import os\ndef run(): return [sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, os.getppid()),\n'
                      '                   os.getpriority(os.PRIO_PROCESS, 0)]', (cpus, nice, 19))


IPC_LEAVE = '''import ctypes, os
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shm = libc.shmget(0x5eed, 64 * 2**20, 0o1666)                   # IPC_CREAT | 0666
    if shm >= 0: ctypes.memset(libc.shmat(shm, None, 0), 1, 64 * 2**20)
    rt = ctypes.CDLL('librt.so.1', use_errno=True)
    q = rt.mq_open(b'/ugttt-left', os.O_CREAT | os.O_RDWR, 0o666, None)
    return [shm >= 0, q >= 0]'''
IPC_FIND = '''import ctypes, os
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    rt = ctypes.CDLL('librt.so.1', use_errno=True)
    return [libc.shmget(0x5eed, 0, 0), rt.mq_open(b'/ugttt-left', os.O_RDONLY)]'''


def test_ipc_objects_do_not_reach_the_next_program(sb):
    "Finding 4: System V shared memory and POSIX queues left by a program are gone (or were never made) for the next."
    for _ in range(4):                                                  # 4 x 64 MB of shared memory, if it could stay
        r = sb.run(IPC_LEAVE, 'run')
        assert r.ok, r
        if sb.program_uids: assert r.value[0], r                       # made in its own IPC namespace
    _valid_everywhere(sb, IPC_FIND, (-1, -1))
    _valid_everywhere(sb, 'import numpy as np\ndef run(): return [float(np.ones(200 * 2**20 // 8).sum()) > 0]', (True,))


NET_LEAVE = '''import socket
def run():
    srv, made = socket.socket(), 0
    try: srv.bind(("127.0.0.1", 0)); srv.listen(4)
    except OSError: return [0]
    for _ in range(10):                                   # closed connections stay in TIME_WAIT for a minute, if they can
        try:
            c = socket.create_connection(srv.getsockname(), timeout=1); a, _ = srv.accept()
            c.sendall(b"secret"); a.recv(6); c.close(); a.close(); made += 1
        except OSError: pass
    srv.close()
    return [made]'''
NET_FIND = '''def run():
    rows = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"):
        try: rows += open(f).read().splitlines()[1:]
        except OSError: pass
    return [len(rows)]'''


def test_no_network_state_reaches_the_next_program(sb):
    "Sockets a program leaves on the loopback (TIME_WAIT, ten closed connections) are not in the next program's /proc/net."
    for _ in range(2 * sb.workers): assert sb.run(NET_LEAVE, 'run').ok
    _valid_everywhere(sb, NET_FIND, (0,))                 # a network namespace per program: the next starts with none


def test_the_kernel_keyring_is_out_of_reach(sb):
    "Finding 5: add_key, keyctl and request_key fail with EPERM (seccomp), so no key outlives a program."
    _needs(sb, 'seccomp')
    src = ('import ctypes\ndef run():\n    libc = ctypes.CDLL(None, use_errno=True)\n    out = []\n'
           '    for nr, args in ((248, (b"user", b"ugttt", b"secret", 6, -4)), (250, (0, -4)), (249, (b"user", b"ugttt", None, 0))):\n'
           '        out.append([libc.syscall(nr, *args), ctypes.get_errno()])\n    return out')
    r = sb.run(src, 'run')
    assert r.ok and r.value == [[-1, 1]] * 3, r                         # -1, EPERM for add_key, keyctl, request_key
    _valid_everywhere(sb)


@pytest.mark.parametrize('name,src,budget', [
    ('deep_chain', 'import os\ndef run():\n    for _ in range(3000):\n        os.mkdir("d"); os.chdir("d")\n    return 1', 5.0),
    ('many_dirs', 'import os, time\ndef run():\n    t = time.monotonic()\n    n = 0\n    while time.monotonic() - t < 1.5:\n'
                  '        for _ in range(1000): os.mkdir(f"/tmp/{n}"); n += 1\n    return n', 5.0),
    ('chmod_0', 'import os\ndef run():\n    for d in ("/tmp/a/b", "/dev/shm/c/d", "e/f"):\n        os.makedirs(d); open(d + "/x", "w").close()\n'
                '        os.chmod(os.path.dirname(d), 0)\n    return 1', 5.0),
])
def test_what_a_program_leaves_in_its_files_costs_the_next_one_nothing(sb, name, src, budget):
    "Finding 6: a deep tree, many directories, unreadable directories: the next programs start at once and succeed."
    for _ in range(3):
        r = sb.run(src, 'run', budget_s=budget)
        assert r.ok, r
    listing = f"import os\ndef run(): return [sorted(set(os.listdir('/tmp')) - set({sorted(BOUND_UNDER_TMP)!r}))]"
    rs = _valid_everywhere(sb, listing if sb.confined else VALID,       # a fresh /tmp per program in every confining mode
                           (['job'],) if sb.confined else (1, 2.5))
    assert max(r.elapsed_s for r in rs) < 1.5, [r.elapsed_s for r in rs]   # the clock starts when the worker is ready


def test_a_worker_whose_wipe_fails_is_replaced_without_failing_anyone():
    "Finding 6 where /tmp is wiped, not fresh (the limits fallback): a tree too deep to wipe taints the worker only."
    with Sandbox(workers=1, budget_s=5.0, memory_mb=256, isolation='limits') as s:
        s.warm()
        for _ in range(3):
            r = s.run('import os\ndef run():\n    for _ in range(3000):\n        os.mkdir("d"); os.chdir("d")\n    return 1', 'run')
            assert r.ok, r
            _valid_everywhere(s)
    assert not list(Path(tempfile.gettempdir()).glob(f'ugttt-sandbox-{os.getpid()}-*'))   # the deep trees went too


def test_processes_of_one_worker_do_not_starve_another(sb):
    "Finding 7: 120 parked processes in one worker (RLIMIT_NPROC is per uid) do not stop threads in the other."
    if not sb.processes_capped: pytest.skip('no process cap here')
    park = ('import os, time\ndef run():\n    n = 0\n    for _ in range(120):\n        try:\n            if os.fork() == 0:\n'
            '                time.sleep(100)\n            n += 1\n        except OSError: break\n    time.sleep(2.0)\n    return n')
    threads = ('import threading, time\ndef run():\n    time.sleep(0.8)\n    ts = [threading.Thread(target=time.sleep, args=(0.05,)) for _ in range(4)]\n'
               '    for t in ts: t.start()\n    for t in ts: t.join()\n    return len(ts)')
    a, b = sb.map([(park, 'run'), (threads, 'run')], budget_s=10.0)
    assert a.ok and a.value >= 100, a
    assert b.ok and b.value == 4, b
    _valid_everywhere(sb)


def test_busy_processes_of_one_worker_leave_the_other_its_cpu(sb):
    "Finding 7: 120 busy children, each in its own session, in one worker: a CPU-bound program in the other still runs."
    _needs(sb, 'cpu')
    burn = ('import time\ndef run():\n    time.sleep(0.5)\n    t, c = time.monotonic(), time.process_time()\n'
            '    while time.process_time() - c < 1.0: pass\n    return time.monotonic() - t')
    alone = sb.run(burn, 'run', budget_s=30.0)
    assert alone.ok, alone
    hog = ('import os, time\ndef run():\n    for _ in range(120):\n        if os.fork() == 0:\n            os.setsid()\n'
           '            while True: pass\n    time.sleep(6.0)\n    return 1')
    h, b = sb.map([(hog, 'run'), (burn, 'run')], budget_s=15.0)
    assert b.ok, b                                                      # the hog itself may well time out
    assert b.value < 3 * alone.value + 1.0, (alone.value, b.value)      # without the cpu cgroup: ~60x slower
    _valid_everywhere(sb)


PARENT_MEMORY = r'''
import json, resource, sys
sys.path.insert(0, ROOT)
from ugttt.sandbox import Sandbox
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024     # MB
with Sandbox(workers=1, budget_s=60.0, memory_mb=1024) as s:
    assert s.run('def run(): return 1', 'run').ok
    before = peak()
    # 12 million floats written straight to every descriptor: a 60 MB JSON reply, within max_result_bytes
    forged = ('import os\ndef run():\n    data = b"{\\"ok\\": true, \\"value\\": [" + b"0.5, " * 12_000_000 + b"0.5]}"\n'
              '    for fd in range(3, 64):\n        try:\n            if stat.S_ISFIFO(os.fstat(fd).st_mode): os.write(fd, data)\n'
              '        except OSError: pass\n    os._exit(0)').replace('import os', 'import os, stat')
    big = s.run(forged, 'run')
    # a 2-million-character program with a syntax error on its last line: never compiled by the parent
    long_src = 'x = 1\n' * 333_333 + 'def run(:\n'
    syn = s.run(long_src, 'run')
    ok = s.run('def run(): return 1', 'run')
    print(json.dumps({'big': big.error, 'syntax': syn.error, 'growth_mb': peak() - before, 'ok': ok.value}))
'''


def test_the_parent_bounds_what_it_parses():
    "Finding 8: a 60 MB JSON result of 12 million values is refused before json.loads, and a 2-million-character program is compiled only inside: the parent grows by little."
    p = subprocess.run([sys.executable, '-c', PARENT_MEMORY.replace('ROOT', repr(str(ROOT)))], capture_output=True,
                       text=True, timeout=300, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out['big'] == f'result too large: more than {S.MAX_RESULT_VALUES} values', out
    assert out['syntax'] == 'syntax error: invalid syntax (line 333334)' or out['syntax'].startswith('syntax error:'), out
    assert out['growth_mb'] < 400 and out['ok'] == 1, out                # json.loads of it alone would take > 1 GB
