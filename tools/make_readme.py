"""Write README.md from nbs/00_index.ipynb, the README's source (settings.ini: readme_nb).

    python tools/make_readme.py          # rewrite README.md
    python tools/make_readme.py --check  # exit 1 if README.md differs from what the notebook gives, or states a stale count

Markdown cells are copied as they are; code cells become ```python blocks with their `#|` directive lines removed;
cells marked `#| hide` (the checks that run in `make test`) are left out.

The README states some counts of the tree in the present tense ("`make docs` executes the N notebooks", "N test
files"); `--check` recounts each (COUNTS) and names any that no longer matches. A count of the past ("when the site had
39 notebooks") is not checked: it says when a time was measured.
"""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE, TARGET = ROOT / 'nbs' / '00_index.ipynb', ROOT / 'README.md'
HEADER = '<!-- generated from nbs/00_index.ipynb by tools/make_readme.py: edit the notebook, not this file -->\n\n'


def render(nb_path: Path = SOURCE) -> str:
    "The README text of a notebook: markdown cells, then visible code cells as python blocks."
    parts = []
    for cell in json.loads(nb_path.read_text())['cells']:
        src = ''.join(cell['source']).strip('\n')
        if not src: continue
        if cell['cell_type'] == 'markdown': parts.append(src)
        elif cell['cell_type'] == 'code':
            lines = src.splitlines()
            directives = [l.replace(' ', '') for l in lines if l.startswith('#|')]
            if '#|hide' in directives or any(d.startswith('#|default_exp') for d in directives): continue
            code = '\n'.join(l for l in lines if not l.startswith('#|')).strip('\n')
            if code: parts.append(f'```python\n{code}\n```')
    return HEADER + '\n\n'.join(parts) + '\n'


def _site_notebooks() -> int:
    "The notebooks `make docs` executes: every numbered notebook under nbs/ but the front page (tools/build_docs.py)."
    return sum(1 for p in (ROOT / 'nbs').rglob('[0-9]*.ipynb') if '.ipynb_checkpoints' not in p.parts and p.stem != '00_index')


def _test_files() -> int:
    "The test files of tests/ that pytest collects (test_*.py)."
    return len(list((ROOT / 'tests').glob('test_*.py')))


COUNTS = [   # (pattern with one number, what it counts, the count now)
    (r'executes the (\d+) notebooks', 'notebooks `make docs` executes', _site_notebooks),
    (r'(\d+) test files', 'test files in tests/', _test_files),
]


def stale_counts(text: str) -> list[str]:
    "Each present-tense count stated in `text` that differs from the tree's, in words; [] when all hold."
    out = []
    for pattern, what, count in COUNTS:
        now = count()
        out += [f'README says {m.group(0)!r} but there are {now} {what}' for m in re.finditer(pattern, text) if int(m.group(1)) != now]
    return out


def main(argv: list) -> int:
    text = render()
    if '--check' in argv:
        if TARGET.read_text() != text:
            print('make_readme: README.md differs from nbs/00_index.ipynb; run `python tools/make_readme.py`')
            return 1
        stale = stale_counts(text)
        for line in stale: print(f'make_readme: {line}; update nbs/00_index.ipynb')
        return 1 if stale else 0
    TARGET.write_text(text)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
