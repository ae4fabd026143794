"""Authoring aid: convert a notebook to and from a plain 'percent' text form for editing in a text editor.

    python tools/nbtext.py to-text nbs/10_uncertainty.ipynb /tmp/10.py   # notebook -> text
    python tools/nbtext.py to-nb /tmp/10.py nbs/10_uncertainty.ipynb     # text -> notebook (outputs dropped)

Cells are separated by lines `# %%` (code) and `# %% [markdown]` (markdown, each line prefixed by `# `).
A code cell's papermill tags go on the marker: `# %% tags=["parameters"]`.
The notebook stays the source of truth; the text form is a throwaway editing view.
"""
import json, re, sys
from pathlib import Path
import nbformat

MARK = re.compile(r'^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$')
KERNELSPEC = {"display_name": "python3", "language": "python", "name": "python3"}


def to_text(nb_path, out_path):
    "Write the cells of a notebook in percent form."
    nb = nbformat.read(nb_path, as_version=4)
    parts = []
    for c in nb.cells:
        tags = c.get('metadata', {}).get('tags')
        t = f' tags={json.dumps(tags)}' if tags else ''
        if c.cell_type == 'markdown':
            body = '\n'.join(('# ' + l) if l else '#' for l in c.source.split('\n'))
            parts.append(f'# %% [markdown]{t}\n{body}')
        else: parts.append(f'# %%{t}\n{c.source}')
    Path(out_path).write_text('\n\n'.join(parts) + '\n')


def to_nb(text_path, nb_path):
    "Build a notebook (no outputs) from percent-form text."
    cells, cur = [], None
    for line in Path(text_path).read_text().split('\n'):
        m = MARK.match(line)
        if m:
            if cur: cells.append(cur)
            cur = {'md': bool(m['md']), 'tags': json.loads(m['tags']) if m['tags'] else None, 'lines': []}
        elif cur is not None: cur['lines'].append(line)
    if cur: cells.append(cur)
    # keep the ids of an existing notebook, cell by cell in order, so that an edit shows as a small diff
    old_ids = [c.get('id') for c in nbformat.read(nb_path, as_version=4).cells] if Path(nb_path).exists() else []
    nb = nbformat.v4.new_notebook()
    nb.metadata = {'kernelspec': KERNELSPEC}
    for c in cells:
        lines = c['lines']
        while lines and not lines[-1].strip(): lines.pop()
        if c['md']:
            src = '\n'.join(l[2:] if l.startswith('# ') else l[1:] if l.startswith('#') else l for l in lines)
            cell = nbformat.v4.new_markdown_cell(src)
        else: cell = nbformat.v4.new_code_cell('\n'.join(lines))
        if c['tags']: cell.metadata['tags'] = c['tags']
        if len(nb.cells) < len(old_ids) and old_ids[len(nb.cells)]: cell['id'] = old_ids[len(nb.cells)]
        nb.cells.append(cell)
    nbformat.write(nb, nb_path)


if __name__ == '__main__':
    cmd, a, b = sys.argv[1:4]
    {'to-text': to_text, 'to-nb': to_nb}[cmd](a, b)
