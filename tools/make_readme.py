"""Write README.md from nbs/00_index.ipynb, the README's source (settings.ini: readme_nb).

    python tools/make_readme.py          # rewrite README.md
    python tools/make_readme.py --check  # exit 1 if README.md differs from what the notebook gives

Markdown cells are copied as they are; code cells become ```python blocks with their `#|` directive lines removed;
cells marked `#| hide` (the checks that run in `make test`) are left out.
"""
import json, sys
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


def main(argv: list) -> int:
    text = render()
    if '--check' in argv:
        if TARGET.read_text() != text:
            print('make_readme: README.md differs from nbs/00_index.ipynb; run `python tools/make_readme.py`')
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
