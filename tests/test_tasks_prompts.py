"""Prompts of every task for parents with and without code, with and without ancestors, with short and long output.

The chat prompt must carry what TTT-Discover's prompts carry and show our own verifier source, with the parent's code
and output fenced so that they cannot close their blocks; the compact prompt must keep its documented line format (the
embedded model is trained on it).
"""
import inspect
import re

import pytest
from fastcore.test import test_eq, test_fail

from ugttt.tasks import get_task, State, TASK_NAMES, COMPACT_PROGRAM_MARKER, STDOUT_TAIL_CHARS, verifier_source

for _helper in (test_eq, test_fail): _helper.__test__ = False   # fastcore's assertions, not tests to collect

CODE = {"ac1": "def propose_candidate():\n    return [1.0] * 10", "ac2": "def construct_function():\n    return [1.0]",
        "cp26": "def run_packing():\n    return c, r, s", "erdos": "def run():\n    return h, c5, n"}


def parents(task_name):
    "Parent variants: (label, State)."
    task = get_task(task_name)
    root = task.initial_state()
    bound = root.bound if root.bound is not None else 2.5
    construction = root.construction if root.construction is not None else [[0.5, 0.5, 0.01]] * 26
    return [
        ("none", None),
        ("root", root),
        ("code", State(code=CODE[task_name], construction=construction, bound=bound)),
        ("code+before", State(code=CODE[task_name] + "\n\n", construction=construction, bound=bound,
                              parent_bounds=[bound * 1.1, bound * 1.2], stdout="iteration 7: best so far\n")),
        ("long output", State(code=CODE[task_name], construction=construction, bound=bound, parent_bounds=[bound],
                              stdout="HEAD" + "z" * 2000 + "TAIL\n")),
    ]


CASES = [(t, label, p) for t in TASK_NAMES for label, p in parents(t)]


@pytest.mark.parametrize("task_name,label,parent", CASES, ids=[f"{t}-{l}" for t, l, _ in CASES])
def test_chat_prompt_content(task_name, label, parent):
    task = get_task(task_name)
    text = task.prompt(parent, "chat", budget_s=60, cpus=2)
    p = parent or State()
    # the problem, our verifier (read-only, exactly the helper sources that are prepended), the rules
    assert task.title in text and task.problem in text
    assert verifier_source(task).rstrip() in text and "read-only" in text
    for f in task.helpers: assert inspect.getsource(f).strip() in text
    for piece in [f"`{task.entry_point}()`", task.returns, "standard library, numpy and scipy", "2 CPU cores",
                  "60 seconds", "No file access, no network", "between ```python and ```"]:
        assert piece in text, piece
    # value, before -> after, target and gap
    better = "lower is better" if task.direction == "min" else "higher is better"
    assert better in text and f"{task.target:g}" in text
    fmt = f".{task.digits}f"
    if p.bound is None:
        assert "No construction has been scored yet" in text and "gap" not in text
    elif p.parent_bounds:
        assert f"before -> after the previous program ({better}): {p.parent_bounds[0]:{fmt}} -> {p.bound:{fmt}}" in text
    else:
        assert f"{task.bound_name} of the current construction ({better}): {p.bound:{fmt}}" in text
    if p.bound is not None:
        gap = p.bound - task.target if task.direction == "min" else task.target - p.bound
        assert f"remaining gap {gap:.6f}" in text
    # construction length and the warm-start global
    if p.construction is not None:
        assert f"The current construction has {len(p.construction)} {task.unit}" in text
        assert (f"`{task.warm_start}`" in text) if task.warm_start else ("not passed to your program" in text)
    else:
        assert "The current construction has" not in text
    # the parent's code, fenced, or a note that there is none
    if p.code.strip():
        assert f"```python\n{p.code.strip()}\n```" in text and "only a real improvement is rewarded" in text
        assert "There is none yet" not in text
    else:
        assert "There is none yet: write a program from scratch." in text
    # the tail of the parent's output, behind the sandbox's truncation note when cut
    if p.stdout.strip():
        block = text.split("## Output of the previous program")[1].split("\n```\n")[1]
        out = p.stdout.strip()
        if len(out) > STDOUT_TAIL_CHARS:
            test_eq(block, f"[... output truncated: {len(out)} bytes in all, the last {STDOUT_TAIL_CHARS} characters "
                           f"follow ...]\n" + out[-STDOUT_TAIL_CHARS:])
        else:
            test_eq(block, out)
    else:
        assert "Output of the previous program" not in text


@pytest.mark.parametrize("task_name,label,parent", CASES, ids=[f"{t}-{l}" for t, l, _ in CASES])
def test_compact_prompt_format(task_name, label, parent):
    task = get_task(task_name)
    text = task.prompt(parent, "compact")
    p = parent or State()
    lines = text.split("\n")
    if p.bound is None: value = "none"
    elif p.parent_bounds: value = f"{p.parent_bounds[0]:.6f} -> {p.bound:.6f}"
    else: value = f"{p.bound:.6f}"
    test_eq(lines[:5], [f"task: {task_name}", f"entry: {task.entry_point}() -> {task.returns_short}",
                        f"{task.bound_name}: {value}",
                        f"target: {task.target:g} ({'lower' if task.direction == 'min' else 'higher'} is better)", "parent:"])
    test_eq("\n".join(lines[5:-1]), p.code.strip() or "(none)")
    test_eq(lines[-1], COMPACT_PROGRAM_MARKER)
    # few tokens: no verifier source, no rules, no output
    assert len(text) - len(p.code) < 200 and "def as_float_array" not in text and "TAIL" not in text


def test_compact_prompts_differ_only_where_the_facts_differ():
    task = get_task("ac2")
    a = task.prompt(State(code="x = 1", bound=0.9), "compact")
    b = task.prompt(State(code="x = 1", bound=0.91), "compact")
    diff = [(u, v) for u, v in zip(a.splitlines(), b.splitlines()) if u != v]
    test_eq(diff, [("C2: 0.900000", "C2: 0.910000")])


def test_the_compact_format_of_a_parent_with_code_and_an_ancestor_exactly():
    parent = State(code="def run():\n    return h, c5, n\n\n", bound=0.381, parent_bounds=[0.382, 0.39])
    test_eq(get_task("erdos").prompt(parent, "compact"),
            "task: erdos\nentry: run() -> (h in [0,1]^n with sum n/2, c5, n)\nC5: 0.382000 -> 0.381000\n"
            "target: 0.3808 (lower is better)\nparent:\ndef run():\n    return h, c5, n\n<|program|>")


def test_an_unknown_style_is_an_error():
    test_fail(lambda: get_task("ac1").prompt(None, "markdown"), contains="unknown prompt style 'markdown'; use 'chat' or 'compact'")


def test_chat_prompt_does_not_copy_the_reference_wording():
    # phrases of the reference templates that our prompts must not reuse verbatim
    reference_phrases = ["expert software developer and inequality specialist", "negative infinity points",
                         "Here is the last code we ran", "You may want to start your search from",
                         "Unless you make a meaningful improvement", "Make sure to think and return the final program",
                         "Our target is to make the upper bound tighter"]
    for t in TASK_NAMES:
        for _, p in parents(t):
            text = get_task(t).prompt(p, "chat")
            for phrase in reference_phrases: assert phrase.lower() not in text.lower(), (t, phrase)


def test_erdos_chat_prompt_names_the_warm_start_and_the_report_rule():
    task, root = get_task("erdos"), get_task("erdos").initial_state()
    text = task.prompt(root, "chat")
    assert f"has {len(root.construction)} steps, available to your program as the numpy array `initial_h_values`" in text
    assert "1e-9 relative" in text and "evaluate_erdos_solution = verify_c5_solution" in text
    assert re.search(r"C5 of the current construction \(lower is better\): 0\.\d{6}\n", text)
