"""Family labelling (ugttt.families): every rule with positive and negative examples, the substring traps of the
reference's analysis scripts ("ring" in `string`, "tent" in `content`, "ga_" in `omega_`, "step" + "function"),
whole programs of each family, broken code, the entropy's properties, and the rules tables of the notebook."""
import json
import math
import time
from collections import Counter
from pathlib import Path

import pytest
from fastcore.test import test_close, test_eq, test_fail
from hypothesis import given, settings, strategies as st

import ugttt.families
import ugttt.family_syntax
from ugttt.families import (FAMILIES, RULES, WINNING_MOTIFS, Rule, code_features, describe_families, family_entropy,
                            has_winning_motif, label_family, matching_families)

ROOT = Path(__file__).resolve().parents[1]
for _helper in (test_close, test_eq, test_fail): _helper.__test__ = False   # fastcore's assertions, not tests to collect

# For each task and rule: (positives, negatives). A positive must fire the rule AND be labelled with the rule's
# family (no earlier rule may swallow it); a negative must not fire the rule (near misses and substring traps).
CASES = {
    'ac1': {
        'sqrt_2n_analytic': (['target = np.sqrt(2 * n)', 'a *= sqrt(2*len(a)) / a.sum()', 's = math.sqrt(2*n)',
                              's = (2 * n) ** 0.5', 'from math import sqrt as r\nt = r(2 * n)'],
                             ['t = np.sqrt(n)', '# normalise to sqrt(2n)', 's = np.sqrt(2) * n', 's = np.sqrt(2 * n + 1)']),
        'lp': (['from scipy.optimize import linprog\nres = linprog(c, A_ub=A, b_ub=b, method="highs")',
                'import cvxpy as cp\nx = cp.Variable(n)', 'res = scipy.optimize.milp(c, constraints=cons)'],
               ['# an LP would be nice (linprog is not used)', 'prog = "linprog"', 'lin_prog = 3']),
        'diff_evo': (['from scipy.optimize import differential_evolution\nr = differential_evolution(f, b)',
                      '# differential evolution, hand-rolled\nfor g in range(100): pass'],
                     ['evolution = 1', 'differential = 2', 'differentialevolve = 3']),
        'basinhopping': (['r = scipy.optimize.basinhopping(f, x0, niter=50)', '# basin hopping restarts'],
                         ['basin = 2', 'hopping = 1']),
        'genetic': (['# genetic algorithm\nbest = run()', 'pop = init_population()\nchild = mutate(pop[0])',
                     'c = crossover(a, b)\nc = mutate(c)'],
                    ['omega_ = 2.0\nga_best = 1', 'population = 10', 'mutation_rate = 0.1']),
        'scipy_min': (['from scipy.optimize import minimize\nr = minimize(f, h0)', 'r = opt.minimize(f, h0, method="L-BFGS-B")',
                       'import scipy.optimize as so\nr = so.minimize(f, h0)'],
                      ['def minimize(f): return f\nr = minimize(g)', 'r = minimize_error(f)', 'method = "newton"']),
        'sim_anneal': (['r = dual_annealing(f, bounds)', '# simulated annealing\nfor it in range(10): pass',
                        'T = 1.0\nanneal_temperature = 0.99', 'if rng.random() < np.exp(-(new - old) / T): h = cand'],
                       ['# annealing is not used', 'temperature = 1.0', 'schedule = [1, 2]', 'w = np.exp(-d / total)']),
        'grad_descent': (['# gradient descent on the max of the autoconvolution\nh -= lr * g',
                          'opt = torch.optim.Adam([h], lr=1e-2)', 'def grad_ascent(h): pass'],
                         ['step = 0.1\ng = grad(h)', 'descent = 1', 'adamant = True']),
        'greedy_local': (['def hill_climb(h): pass', '# local search over single heights', 'h = greedy(h)  # flip one height'],
                         ['hill = 1\nclimb = 2', 'greedy = True', 'local = 1\nsearch = 2']),
        'random_search': (['best = random_search(n, trials=100)', 'for r in range(10):  # random restarts\n    pass'],
                          ['x = np.random.rand(n)', 'restart = False', 'search = "random"']),
    },
    'ac2': {
        'sim_anneal': (['r = dual_annealing(f, bounds)', '# simulated annealing with a cooling schedule\nT *= 0.99'],
                       ['T = 1.0', '# no annealing here']),
        'diff_evo': (['from scipy.optimize import differential_evolution\nres = differential_evolution(neg_c2, bounds, popsize=30)'],
                     ['evo = 1', 'differential = "evolution"']),
        'basinhopping': (['r = basinhopping(f, x0)'], ['basin = 1']),
        'shgo': (['r = scipy.optimize.shgo(f, bounds)'], ['shogun = 1', 'print("shgo")']),
        'cma_es': (['import cma\nes = cma.CMAEvolutionStrategy(x0, 0.5)', '# CMA-ES\nx = 1'], ['cmap = plt.cm.viridis', 'dcma = 1']),
        'particle_swarm': (['# particle swarm optimisation\nv = w * v', 'from pyswarm import pso\nx, f = pso(f, lb, ub)'],
                           ['particle = 1', 'swarm = 2', 'psoriasis = 0']),
        'genetic': (['# genetic algorithm\nx = 1', 'w = tournament(pop, 5)', 'child = mutate(a)\nchild = crossover(child, b)',
                     'elite = pop[:5]\nmutation = 0.2'],
                    ['omega_ = 1\nga_ = 2', 'elite = 1', 'crossover = None']),
        'gradient_based/method': (['r = minimize(f, h0, method="SLSQP")', 'r = opt.minimize(f, h0, method="L-BFGS-B")',
                                   'opt = torch.optim.LBFGS([h])'],
                                  ['method = "random"', '# SLSQP is too slow here']),
        'gradient_based/gradient': (['opt = torch.optim.Adam([h], lr=0.01)', '# gradient ascent on C2\nh += lr * g',
                                     'loss = -c2(h)\nloss.backward()\nimport torch', 'g = jax.grad(c2)(h)'],
                                    ['step = 0.01\ng = grad(h)', 'gradient = 1', 'h.backward()  # no torch']),
        'gradient_based/minimize': (['from scipy.optimize import minimize\nr = minimize(neg_c2, h0)'],
                                    ['r = minimize(neg_c2, h0)  # home-made', 'import scipy\nminimize = 1']),
        'greedy_local': (['h = hill_climb(h, iters=1000)', '# greedy sign flip\nh[i] = -h[i]', '# coordinate ascent over heights'],
                         ['greedy = True', 'hill = 3']),
        'random_search': (['# random search over heights\nfor t in range(100): pass', 'best = random_search(f)'],
                          ['h = np.random.rand(n)', 'search = 1']),
    },
    'cp26': {
        'non_uniform_rows': (['rows = [5, 5, 5, 5, 6]', 'rows = [6, 5, 5, 5, 5]\nfor k in rows: pass',
                              'per_row = [4, 5, 4, 5, 4, 4]', 'rows = [5] * 4 + [6]'],
                             ['rows = [5, 5, 5, 5, 5]', '# rows [5, 5, 5, 5, 6]', 'x = np.linspace(0, 1, 25)',
                              'r = [0, 1, 25]', 'rows = [5, 5, 5, 5, 7]']),
        'hex_grid': (['# hexagonal packing\nx = 1', 'pts = hex_grid(6, 5)', '# staggered rows, offset by half a gap'],
                     ['h = hex(255)', 'hexx = 1', 'grid = 1']),
        'concentric': (['for ring in range(3): pass', '# circles on concentric rings\nx = 1', 'n_rings = 3'],
                       ['s = str(x)  # a string', '# during scoring', 'springs = 2', 'bring = 1']),
        'greedy': (['# greedy placement of the largest circle that fits\nx = 1', 'c = greedy_place(26)'],
                   ['greed = 1', 'agreedy = 0']),
        'equal_radii': (['radii = np.full(n, 0.1)', 'r = np.ones(n) * 0.09'],
                        ['r = np.full((n, 2), 0.5)', 'r = np.ones(n)', 'r = np.full(m, 0.1)']),
        'uniform_rows_5x5': (['# a 5x5 layout plus one circle\nx = 1', 'rows = [5, 5, 5, 5, 5]', 'k = 5*5 + 1'],
                             ['k = 5*50', 'x = 1.5*5', 'rows = [4, 4, 4]']),
        'grid': (['xs, ys = np.meshgrid(g, g)', 'pts = make_grid(5, 6)'], ['gridlock = 0', 'rigid = 1']),
        'force_directed': (['# force-directed relaxation\nx = 1', 'repulsion_force = 0.1'], ['force = 1', 'directed = 2']),
        'variable_radii': (['radii = x[2 * n:]', 'r = params[52:]', '# radii are optimisation variables\nx = 1'],
                           ['radii = compute(x)', 'variable = 1', 'r = xs[0]']),
        'scipy_min': (['from scipy.optimize import minimize\nres = minimize(f, x0, constraints=cons)',
                       'res = minimize(f, z0, method="SLSQP")'],
                      ['res = minimize(f, z0)', '# SLSQP would be better']),
    },
    'erdos': {
        'fourier': (['h = 0.5 + 0.3 * np.sin(2 * np.pi * k * x)', '# Fourier coefficients\nc = 1', 'h = a + b * math.cos(x)'],
                    ['sinh = 1', 'h = np.sinh(x)', 'cos_theta = 0.5']),
        'bump_triangle': (['h = np.maximum(0, 1 - abs(x))  # triangle', 'h = tent(x, 1.0)', 'h = bump(x)'],
                          ['# content of the potential with intent\nx = 1', 'h = bump(x)  # Gaussian bump', 'bumper = 1']),
        'gaussian_bump': (['h = np.exp(-((x - 1) / 0.3) ** 2)', '# sum of gaussians\nh = 1', 'h = norm.pdf(x, 1, 0.3)'],
                          ['h += np.random.normal(0, 0.01, n)  # Gaussian noise', 'p = np.exp(-delta / T)', 'gaussiana = 1']),
        'step_function': (['h = np.where(x < 1.0, 1.0, 0.0)', 'h = np.zeros(n)\nh[: n // 2] = 1.0', 'h = step_function(x)',
                           'h = np.heaviside(1 - x, 0.5)'],
                          ['"""Optimise the step function h with step size 0.1."""\nh = x', 'step = 0.1\nfunction = 1',
                           'h[:] = g[:]']),
        'piecewise': (['h = np.piecewise(x, [x < 1, x >= 1], [1, 0])', '# piecewise linear profile\nh = x'],
                      ['piece = 1', 'wise = 2']),
        'warm_start': (['h = np.array(initial_h_values)', "h0 = globals().get('initial_h_values')", '# warm start from the parent\nh = x'],
                       ['initial_values = 1', 'warm = 1\nstart = 2']),
        'random_init': (['h = np.random.uniform(0, 1, n)', 'rng = np.random.default_rng(0)\nh = rng.uniform(0, 1, n)',
                         'h = np.random.rand(n)'],
                        ['random_state = 0', 'h = uniform(n)', 'rng = 0\nh = rng.uniform(0, 1)']),
        'constant_init': (['h = np.full(n, 0.5)', 'h = 0.5 * np.ones(n)', 'h = np.zeros(n)'],
                          ['h = full(n)', 'ones = 1', 'h = jnp.zeros(n)']),
        'linspace_based': (['x = np.linspace(0, 2, n)\nh = x / 2'], ['space = 1', 'lin = 2']),
    },
}


def test_every_rule_has_examples():
    for task, rules in RULES.items():
        test_eq(set(CASES[task]), {r.name for r in rules})
        test_eq([name for name, (pos, neg) in CASES[task].items() if not (pos and neg)], [])


@pytest.mark.parametrize('task,rule', [(t, r) for t, rs in RULES.items() for r in rs], ids=lambda x: getattr(x, 'name', x))
def test_rule_examples(task, rule):
    pos, neg = CASES[task][rule.name]
    test_eq([c for c in pos if not rule.matches(c)], [])                          # every positive fires the rule
    test_eq({c: label_family(task, c) for c in pos}, dict.fromkeys(pos, rule.family))   # and no earlier rule takes it
    test_eq([c for c in neg if rule.matches(c)], [])                              # no near miss fires it


# The reference's substring taggers misfire on these; ours must not.
@pytest.mark.parametrize('code', ['s = str(x)  # convert to string', '# during the scoring loop\nx = 1',
                                  'def scoring(string): return string', 'bring = spring = 1'])
def test_ring_is_not_concentric(code):
    test_eq(label_family('cp26', code), 'other')


@pytest.mark.parametrize('code', ['content = 1', 'potential = energy(x)', '# our intent: extend the content', 'attention = 0'])
def test_tent_is_not_bump(code):
    test_eq(label_family('erdos', code), 'other')


def test_omega_is_not_genetic():
    code = 'omega_1 = 2.0 * np.pi\nomega_2 = omega_1 / 2\nmega_ = 1'
    test_eq((label_family('ac1', code), label_family('ac2', code)), ('other', 'other'))


def test_step_and_function_do_not_swallow_erdos():
    # a random init + local search whose docstring, like the task, calls h a step function
    code = '''
import numpy as np
def run():
    """Find a step function h minimising the overlap; step size shrinks each round."""
    h = np.random.uniform(0, 1, 200)
    step = 0.05
    for it in range(1000):
        h = local_move(h, step)
    return h
'''
    test_eq(label_family('erdos', code), 'random_init')


# Whole programs, the way a policy writes them: (task, family, program).
PROGRAMS = [
    ('ac1', 'sqrt_2n_analytic', '''
import numpy as np
def propose_candidate():
    """Cauchy-Schwarz target: scale the heights so that their sum is sqrt(2n)."""
    n = 600
    x = np.linspace(-1, 1, n)
    a = np.clip(1 - x ** 2, 0, None)
    target_sum = np.sqrt(2 * n)
    return list(a * target_sum / a.sum())
'''),
    ('ac1', 'lp', '''
import numpy as np
from scipy.optimize import linprog
def propose_candidate():
    """LP iteration: maximise sum b with the autoconvolution bound (no cvxpy here)."""
    n = 200
    f = np.ones(n)
    for it in range(5):
        M = np.max(np.convolve(f, f))
        res = linprog(-np.ones(n), A_ub=np.eye(n), b_ub=np.full(n, M), bounds=(0, None), method="highs")
        f = 0.5 * f + 0.5 * res.x
    return list(f)
'''),
    ('ac1', 'sim_anneal', '''
import numpy as np
def propose_candidate():
    """Simulated annealing on the heights."""
    rng = np.random.default_rng(0)
    h = np.array(height_sequence_1, dtype=float)
    T = 1.0
    for it in range(2000):
        cand = np.clip(h + rng.normal(0, 0.05, h.size), 0, None)
        if rng.random() < np.exp(-(score(cand) - score(h)) / T):
            h = cand
        T *= 0.999
    return list(h)
'''),
    ('ac1', 'genetic', '''
import numpy as np
def propose_candidate():
    pop = [np.random.rand(100) for _ in range(30)]
    for gen in range(50):
        pop.sort(key=score)
        parents = pop[:10]
        children = [mutate(crossover(parents[i], parents[-i])) for i in range(20)]
        pop = parents + children
    return list(pop[0])
'''),
    ('ac2', 'diff_evo', '''
import numpy as np
from scipy.optimize import differential_evolution
def construct_function():
    """Differential evolution on 50 heights, polished with L-BFGS-B."""
    res = differential_evolution(lambda h: -c2(h), [(0, 1)] * 50, maxiter=200, polish=True, seed=1)
    return list(res.x)
'''),
    ('ac2', 'gradient_based', '''
import numpy as np
from scipy.optimize import minimize
def construct_function():
    h0 = np.random.rand(80)
    res = minimize(lambda h: -c2(np.abs(h)), h0, method="L-BFGS-B")
    return list(np.abs(res.x))
'''),
    ('ac2', 'random_search', '''
import numpy as np
def construct_function():
    """Random search with restarts: keep the best of many random height vectors."""
    best, best_val = None, -1
    for trial in range(500):
        h = np.random.rand(64)
        v = c2(h)
        if v > best_val: best, best_val = h, v
    return list(best)
'''),
    ('cp26', 'non_uniform_rows', '''
import numpy as np
def run_packing():
    """Rows of 5, 5, 5, 5 and 6 circles, then refine."""
    rows = [5, 5, 5, 5, 6]
    centers = []
    for j, k in enumerate(rows):
        y = (j + 0.5) / len(rows)
        for i in range(k):
            centers.append([(i + 0.5) / k, y])
    centers = np.array(centers)
    radii = np.full(26, 0.09)
    return centers, radii, radii.sum()
'''),
    ('cp26', 'greedy', '''
import numpy as np
def run_packing():
    """Greedy placement: repeatedly put the largest circle that fits at the best candidate point of a grid."""
    g = np.linspace(0.01, 0.99, 60)
    cands = np.array([(x, y) for x in g for y in g])
    centers, radii = [], []
    for k in range(26):
        r = np.array([max_radius(c, centers, radii) for c in cands])
        i = int(np.argmax(r))
        centers.append(cands[i]); radii.append(r[i])
    return np.array(centers), np.array(radii), float(np.sum(radii))
'''),
    ('cp26', 'concentric', '''
import numpy as np
def run_packing():
    """One circle in the centre and concentric rings of 8 and 17 around it."""
    centers = [[0.5, 0.5]]
    for ring, (m, rad) in enumerate([(8, 0.22), (17, 0.42)]):
        for k in range(m):
            t = 2 * np.pi * k / m
            centers.append([0.5 + rad * np.cos(t), 0.5 + rad * np.sin(t)])
    centers = np.clip(np.array(centers), 0.05, 0.95)
    radii = fit_radii(centers)
    return centers, radii, radii.sum()
'''),
    ('cp26', 'variable_radii', '''
import numpy as np
from scipy.optimize import minimize
def run_packing():
    x0 = np.concatenate([np.random.rand(52), np.full(26, 0.05)])
    def neg_sum(x):
        radii = x[52:]
        return -radii.sum()
    res = minimize(neg_sum, x0, method="SLSQP", constraints=make_constraints())
    centers, radii = res.x[:52].reshape(26, 2), res.x[52:]
    return centers, radii, radii.sum()
'''),
    ('erdos', 'fourier', '''
import numpy as np
def run():
    """Fourier ansatz h(x) = a + b sin(kx) on 400 points, then SLSQP."""
    n_points = 400
    x = np.linspace(0, 2, n_points)
    h = 0.5 + 0.25 * np.sin(np.pi * x)
    h = np.clip(h, 0, 1)
    return h, c5(h), n_points
'''),
    ('erdos', 'warm_start', '''
import numpy as np
def run():
    """Start from the parent's h and perturb it with Gaussian noise."""
    h = np.array(initial_h_values, dtype=float)
    for it in range(200):
        cand = np.clip(h + np.random.normal(0, 0.01, h.size), 0, 1)
        if c5(cand) < c5(h): h = cand
    return h, c5(h), len(h)
'''),
    ('erdos', 'random_init', '''
import numpy as np
from scipy.optimize import minimize
def run():
    """Random start plus local optimisation of the step function."""
    n = 100
    h0 = np.random.uniform(0.3, 0.7, n)
    res = minimize(c5, h0, method="L-BFGS-B", bounds=[(0, 1)] * n)
    return res.x, c5(res.x), n
'''),
]


@pytest.mark.parametrize('task,family,code', PROGRAMS, ids=[f'{t}-{f}' for t, f, _ in PROGRAMS])
def test_whole_programs(task, family, code):
    test_eq(label_family(task, code), family)


def test_broken_and_odd_code():
    truncated = PROGRAMS[4][2][:140]          # cut mid-call, unbalanced brackets
    test_eq(code_features(truncated).tokenizer, 'regex')
    test_eq(label_family('ac2', truncated), 'diff_evo')
    test_eq(label_family('cp26', 'def run_packing(:\n    rows = [5, 5, 5, 5, 6]'), 'non_uniform_rows')
    test_eq(label_family('erdos', "h = np.sin(x)\n    bad indent\n  s = 'open"), 'fourier')
    test_eq(label_family('ac1', 'Here is my idea: use basinhopping!'), 'basinhopping')   # prose without code
    test_eq(label_family('ac1', ''), 'other')
    test_eq(label_family('erdos', '\x00\x01'), 'other')
    test_eq(label_family('ac1', 'x = 1\n' * 20000), 'other')                            # long input


def test_errors():
    test_fail(lambda: label_family('circle', 'x'), contains='valid tasks: ac1, ac2, cp26, erdos')
    test_fail(lambda: label_family('ac1', b'x = 1'), contains='code must be a str, got bytes')
    test_fail(lambda: label_family(1, 'x = 1'), contains='task must be a task name or a Task, got int')
    test_fail(lambda: matching_families('ac1', ['x = 1']), contains='code must be a str, got list')
    test_fail(lambda: has_winning_motif('ac5', 'x = 1'), contains="unknown task 'ac5'")
    test_fail(lambda: family_entropy('abc'), contains='not a single str')
    test_fail(lambda: describe_families('ac9'), contains="unknown task 'ac9'")


def test_rule_family_defaults_to_name():
    test_eq(Rule('grid', 'the word grid', lambda f: f.word('grid')).family, 'grid')
    test_eq(Rule('gradient_based/minimize', 'scipy minimize', lambda f: True, family='gradient_based').family, 'gradient_based')
    # every rule whose name is not its family says so: only AC2's three gradient-based rules
    test_eq(sorted((t, r.name) for t, rs in RULES.items() for r in rs if r.family != r.name),
            [('ac2', 'gradient_based/gradient'), ('ac2', 'gradient_based/method'), ('ac2', 'gradient_based/minimize')])


def test_families_interface():
    from ugttt.tasks import TASK_NAMES
    test_eq(tuple(FAMILIES), TASK_NAMES)
    test_eq(tuple(RULES), TASK_NAMES)
    test_eq(tuple(WINNING_MOTIFS), TASK_NAMES)
    for task, fams in FAMILIES.items():
        test_eq(fams, tuple(dict.fromkeys(r.family for r in RULES[task])) + ('other',))
        test_eq(len(set(fams)), len(fams))
        test_eq(len({r.name for r in RULES[task]}), len(RULES[task]))             # rule names unique per task
        test_eq([r.name for r in RULES[task] if not r.description], [])
    # the families the embedded model's corpus is built from exist
    assert {'sqrt_2n_analytic', 'scipy_min', 'lp', 'sim_anneal', 'basinhopping', 'genetic', 'grad_descent'} <= set(FAMILIES['ac1'])
    assert {'diff_evo', 'gradient_based', 'random_search', 'sim_anneal', 'basinhopping', 'genetic'} <= set(FAMILIES['ac2'])
    assert {'non_uniform_rows', 'hex_grid', 'grid', 'greedy', 'scipy_min', 'variable_radii', 'concentric'} <= set(FAMILIES['cp26'])
    assert {'fourier', 'random_init', 'step_function', 'bump_triangle', 'gaussian_bump', 'warm_start', 'linspace_based'} <= set(FAMILIES['erdos'])


def test_machinery_is_reexported():
    # `from ugttt.families import code_features, uses_sqrt_2n, ...` keeps working after the split into two modules
    test_eq([n for n in ugttt.family_syntax.__all__ if getattr(ugttt.families, n, None) is not getattr(ugttt.family_syntax, n)], [])
    test_eq([n for n in ugttt.family_syntax.__all__ if n not in ugttt.families.__all__], [])   # and by `import *`


def test_notebook_tables_are_the_rules():
    # the rules tables in the notebooks' markdown (each in its benchmark's notebook) are `describe_families`' output, so
    # they cannot drift from the code
    md = '\n'.join(''.join(c['source']) for p in sorted((ROOT/'nbs').glob('*.ipynb'))
                    for c in json.loads(p.read_text())['cells'] if c['cell_type'] == 'markdown')
    test_eq([t for t in RULES if describe_families(t) not in md], [])


def test_winning_motifs():
    test_eq(has_winning_motif('ac1', PROGRAMS[0][2]), True)
    test_eq(has_winning_motif('ac1', PROGRAMS[1][2]), False)
    test_eq((has_winning_motif('ac2', PROGRAMS[4][2]), has_winning_motif('ac2', PROGRAMS[5][2])), (True, True))
    test_eq(has_winning_motif('ac2', PROGRAMS[6][2]), False)
    test_eq((has_winning_motif('cp26', PROGRAMS[7][2]), has_winning_motif('cp26', PROGRAMS[8][2])), (True, False))
    test_eq((has_winning_motif('erdos', PROGRAMS[11][2]), has_winning_motif('erdos', PROGRAMS[13][2])), (True, False))


@settings(max_examples=200, deadline=None)
@given(task=st.sampled_from(sorted(RULES)), code=st.text(max_size=300))
def test_any_text_gets_a_known_label(task, code):
    label = label_family(task, code)
    assert label in FAMILIES[task]
    test_eq(label, (matching_families(task, code) or ('other',))[0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(['a', 'b', 'c', 'd', 'e']), max_size=60))
def test_entropy_properties(labels):
    h = family_entropy(labels)
    k = len(set(labels))
    assert 0.0 <= h <= (math.log2(k) if k else 0.0) + 1e-12
    test_close(family_entropy(list(reversed(labels))), h, eps=1e-12)        # order does not matter
    test_close(family_entropy(labels * 3), h, eps=1e-12)                    # only proportions matter
    if k <= 1: test_eq(h, 0.0)
    n = len(labels)
    naive = -sum(c / n * math.log2(c / n) for c in Counter(labels).values()) if n else 0.0
    test_close(h, naive, eps=1e-12)


def test_entropy_uniform_is_log2_k():
    for k in range(1, 9):
        test_close(family_entropy([str(i) for i in range(k)] * 3), math.log2(k), eps=1e-12)


@pytest.mark.parametrize('code', ['h = np.exp(' * 5000, 'np.where(' * 5000, 'sqrt(' * 5000, 'a[b' * 20000,
                                  '(2*n' * 20000, 'from a import b as c, ' * 5000, '[1,' * 20000],
                         ids=['exp(', 'where(', 'sqrt(', 'a[b', '(2*n', 'imports', '[1,'])
def test_pathological_input_is_not_quadratic(code):
    # unclosed calls once made the argument scan quadratic (70 s for 55 kB); the paren table keeps it linear, so
    # the four labels of 55-100 kB take well under a second of CPU; CPU time, so that a loaded machine changes nothing
    code_features.cache_clear()
    t = time.process_time()
    for task in RULES: label_family(task, code)
    assert time.process_time() - t < 5.0
