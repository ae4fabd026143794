"""Task.evaluate end to end: real generated-style programs through the real sandbox, scored in this process.

For each task: a valid program (with and without the parent's warm start), an invalid return, an exception, a
timeout; the Erdős program that lies about C5; programs that monkeypatch numpy or the verifier in their own process;
extraction edge cases (no code, prose only, unclosed fence, syntax error, __future__ imports); output truncation;
child states.
"""
import math
import time

import numpy as np
import pytest

from ugttt.tasks import get_task, State, Evaluation, MAX_STDOUT_CHARS, c1_upper_bound, c2_lower_bound, c5_upper_bound
from ugttt.sandbox import Sandbox, default_sandbox


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox(workers=2, budget_s=10.0)
    yield sb
    sb.close()


def fenced(code: str) -> str:
    "A generated text: some reasoning, then the program in a python fence."
    return f"I will try a simple construction.\n\n```python\n{code.strip()}\n```\nThis should work."


def assert_failed(ev: Evaluation, *fragments):
    assert isinstance(ev, Evaluation)
    assert not ev.correct and ev.reward == 0.0 and ev.bound is None and ev.construction is None
    for f in fragments: assert f in ev.error, (f, ev.error)
    assert ev.child_state(State()) is None


# ---------------------------------------------------------------- valid programs, one per task

def test_ac1_valid_program_and_child_state(sandbox):
    task, root = get_task("ac1"), get_task("ac1").initial_state()
    program = fenced("""
def propose_candidate(seed=42, budget_s=10.0):
    heights = [1.0] * 10
    print("start length", len(height_sequence_1), "own C1", evaluate_sequence(heights))
    return heights
""")
    ev = task.evaluate(program, parent=root, budget_s=10.0, sandbox=sandbox)
    assert ev.correct and ev.error is None, ev.error
    assert ev.bound == 2.0 and ev.reward == 0.5 and ev.construction == [1.0] * 10      # 2·10·10 / 10²
    assert "start length 1000 own C1 2.0" in ev.stdout
    assert ev.code.startswith("def propose_candidate(") and "```" not in ev.code
    child = ev.child_state(root)
    assert child.bound == 2.0 and child.reward == 0.5 and child.parent_bounds == [root.bound] and child.code == ev.code
    assert "own C1 2.0" in child.stdout
    grandchild = ev.child_state(child)
    assert grandchild.parent_bounds == [2.0, root.bound]
    assert f"C1: {root.bound:.6f} -> 2.000000" in task.prompt(child, "compact")       # before -> after


def test_ac1_warm_start_round_trips_exactly_and_arrays_are_accepted(sandbox):
    task, root = get_task("ac1"), get_task("ac1").initial_state()
    ev = task.evaluate(fenced("def propose_candidate():\n    return height_sequence_1 * 3.0"), parent=root,
                       sandbox=sandbox)       # an ndarray, scaled: C1 is scale-free, so the bound is the parent's
    assert ev.correct, ev.error
    assert math.isclose(ev.bound, root.bound, rel_tol=1e-14)
    assert ev.construction == [3.0 * v for v in root.construction]


def test_ac2_valid_program(sandbox):
    ev = get_task("ac2").evaluate(fenced("def construct_function():\n    return [1.0, 0.0, 0.0, 1.0]"),
                                  parent=get_task("ac2").initial_state(), sandbox=sandbox)
    assert ev.correct and ev.bound == 0.5 and ev.reward == 0.5, ev.error


def test_cp26_valid_program_ignores_the_reported_sum(sandbox):
    program = fenced("""
import numpy as np

def run_packing():
    centers = [[0.1 + 0.2 * i, 0.1 + 0.2 * j] for i in range(5) for j in range(5)] + [[0.2, 0.2]]
    radii = np.array([0.1] * 25 + [0.04])
    validate_packing(centers, radii)          # the verifier is available to the program
    return np.array(centers), radii, 1000.0   # a false sum: ignored
""")
    ev = get_task("cp26").evaluate(program, parent=State(), sandbox=sandbox)
    assert ev.correct, ev.error
    assert math.isclose(ev.bound, 2.54, rel_tol=1e-14) and ev.reward == ev.bound
    assert len(ev.construction) == 26 and ev.construction[25] == [0.2, 0.2, 0.04]
    assert ev.child_state(State()).parent_bounds == []                     # the empty root has no bound


def test_erdos_valid_program_from_the_injected_warm_start(sandbox):
    task, root = get_task("erdos"), get_task("erdos").initial_state()
    program = fenced("""
def run(seed=42, budget_s=10.0):
    h = initial_h_values.copy()
    return h, c5_upper_bound(h), len(h)
""")
    ev = task.evaluate(program, parent=root, sandbox=sandbox)
    assert ev.correct, ev.error
    assert ev.bound == root.bound and ev.reward == 1 / root.bound and ev.construction == root.construction


# ---------------------------------------------------------------- failures: reward 0 with a reason

@pytest.mark.parametrize("task_name,code,fragment", [
    ("ac1", "def propose_candidate():\n    return 'abc'", "expected a list"),
    ("ac1", "def propose_candidate():\n    return [float('nan'), 1.0]", "NaN"),
    ("ac1", "def propose_candidate():\n    return [True, 1.0]", "bool"),
    ("ac2", "def construct_function():\n    return [0.0, -1.0]", "sum to 0"),
    ("cp26", "def run_packing():\n    return [[0.5, 0.5]] * 26, [0.1] * 26, 2.6", "overlap"),
    ("cp26", "def run_packing():\n    return [[0.5, 0.5]] * 25, [0.0] * 25, 0.0", "(26, 2)"),
    ("erdos", "def run():\n    return [0.5, 1.5], 0.5, 2", "[0, 1]"),
    ("erdos", "def run():\n    return [0.5] * 4, 0.5", "(h_values, c5_bound, n_points)"),
])
def test_invalid_returns(sandbox, task_name, code, fragment):
    ev = get_task(task_name).evaluate(fenced(code), sandbox=sandbox)
    assert_failed(ev, "invalid result:", fragment)


@pytest.mark.parametrize("task_name", ["ac1", "ac2", "cp26", "erdos"])
def test_exceptions(sandbox, task_name):
    task = get_task(task_name)
    ev = task.evaluate(fenced(f"def {task.entry_point}():\n    print('about to fail')\n    raise ValueError('no idea')"),
                       sandbox=sandbox)
    assert_failed(ev, "ValueError", "no idea")
    assert "about to fail" in ev.stdout


@pytest.mark.parametrize("task_name", ["ac1", "erdos"])
def test_timeouts(sandbox, task_name):
    task = get_task(task_name)
    start = time.perf_counter()
    ev = task.evaluate(fenced(f"def {task.entry_point}():\n    while True:\n        pass"), budget_s=1.0, sandbox=sandbox)
    assert_failed(ev, "timeout")
    assert time.perf_counter() - start < 1.0 + 2.0


def test_wrong_entry_point(sandbox):
    assert_failed(get_task("cp26").evaluate(fenced("def run():\n    return 1"), sandbox=sandbox), "run_packing")


def test_erdos_lying_about_c5_is_invalid(sandbox):
    root = get_task("erdos").initial_state()
    program = fenced("""
def run():
    h = initial_h_values
    true_c5 = evaluate_erdos_solution(h, c5_upper_bound(h), len(h))
    print("true", true_c5)
    return h, true_c5 - 5e-5, len(h)      # the reference would reward this claim (within its 1e-4 tolerance)
""")
    ev = get_task("erdos").evaluate(program, parent=root, sandbox=sandbox)
    assert_failed(ev, "invalid result:", "disagrees", repr(root.bound))
    assert "true" in ev.stdout


# ---------------------------------------------------------------- the child cannot forge its score

def test_monkeypatching_numpy_and_the_verifier_in_the_child_changes_nothing(sandbox):
    spiky = [1.0, 0.0, 0.0, 0.0, 0.0, 1000.0]
    program = fenced(f"""
import numpy as np

def fake_convolve(a, b, mode="full"):
    return np.ones(len(a) + len(b) - 1) * 1e-9

np.convolve = fake_convolve
np.max = lambda x, *a, **k: 1e-9

def c1_upper_bound(heights):
    return 1.0

evaluate_sequence = c1_upper_bound

def propose_candidate():
    print("my C1", evaluate_sequence({spiky!r}))
    return {spiky!r}
""")
    ev = get_task("ac1").evaluate(program, parent=get_task("ac1").initial_state(), sandbox=sandbox)
    assert ev.correct, ev.error
    assert "my C1 1.0" in ev.stdout
    assert ev.bound == c1_upper_bound(spiky) and ev.bound > 5          # honest: 2·6·1000² / 1001² ≈ 11.98
    assert np.convolve([1.0], [1.0]).tolist() == [1.0]               # and this process was never touched


def test_erdos_patching_correlate_and_the_verifier_does_not_help(sandbox):
    program = fenced("""
import numpy as np
np.correlate = lambda a, v, mode="valid": np.zeros(1)
np.convolve = lambda a, v, mode="full": np.zeros(1)
verify_c5_solution = evaluate_erdos_solution = lambda h, c5, n: c5

def run():
    h = [0.5] * 10
    return h, 0.3, 10                      # true C5 of the constant 1/2 is 0.5
""")
    ev = get_task("erdos").evaluate(program, sandbox=sandbox)
    assert_failed(ev, "disagrees", "0.5")


# ---------------------------------------------------------------- extraction and compilation

def test_no_code_and_prose_only(sandbox):
    assert_failed(get_task("ac1").evaluate("", sandbox=sandbox), "empty program")
    assert_failed(get_task("ac1").evaluate("```python\n```", sandbox=sandbox), "empty program")
    assert_failed(get_task("ac1").evaluate("I am not sure how to do this.", sandbox=sandbox), "syntax error")


def test_syntax_error_is_caught_before_running(sandbox):
    ev = get_task("ac2").evaluate(fenced("def construct_function(:\n    return [1.0]"), sandbox=sandbox)
    assert_failed(ev, "syntax error", "line 1")
    assert ev.stdout == "" and ev.elapsed_s < 0.5


def test_last_block_unclosed_fence_and_future_import(sandbox):
    text = ("First idea:\n```python\ndef propose_candidate():\n    return [1.0]\n```\nBetter:\n```python\n"
            "from __future__ import annotations\n\ndef helper(n: int) -> list[float]:\n    return [1.0] * n\n\n"
            "def propose_candidate():\n    return helper(10)")                           # no closing fence
    ev = get_task("ac1").evaluate(text, sandbox=sandbox)
    assert ev.correct, ev.error
    assert ev.construction == [1.0] * 10 and ev.code.startswith("from __future__ import annotations")


def test_output_is_truncated(sandbox):
    ev = get_task("ac2").evaluate(fenced("def construct_function():\n    print('y' * 200000 + 'END')\n    return [1.0]"),
                                  sandbox=sandbox)
    assert ev.correct, ev.error
    assert len(ev.stdout) <= MAX_STDOUT_CHARS + 100 and ev.stdout.rstrip().endswith("END")
    assert "200004 bytes in all" in ev.stdout.splitlines()[0]      # the sandbox's note (default bound) survives evaluate
    child = ev.child_state(State())
    prompt = get_task("ac2").prompt(child, "chat")
    block = prompt.split("## Output of the previous program")[1].split("```")[1]      # the fenced output tail
    assert block == "\n[... earlier output truncated ...]\n" + "y" * 497 + "END\n"     # the last 500 characters


def test_default_sandbox_is_used_when_none_is_given():
    ev = get_task("ac1").evaluate(fenced("def propose_candidate():\n    return [2.0, 2.0]"))
    assert ev.correct and ev.bound == 2.0
    assert default_sandbox() is default_sandbox()


def test_non_text_program_is_a_type_error(sandbox):
    with pytest.raises(TypeError, match="must be a str"):
        get_task("ac1").evaluate(None, sandbox=sandbox)
