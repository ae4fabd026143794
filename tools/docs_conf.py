"""Sphinx configuration of the documentation site (tools/build_docs.py copies it into _build/docs/src as conf.py)."""
project = "ugttt"
author = "ugttt developers"
copyright = "2026 onwards, ugttt developers"
extensions = ["myst_nb", "sphinx.ext.autodoc"]
autodoc_member_order = "bysource"                     # the API page lists each module's names in reading order
autodoc_default_options = {"members": True}           # every public name (a module's __all__) with its signature and docstring
myst_enable_extensions = ["dollarmath", "amsmath"]   # $...$ and $$...$$ as in the notebooks, rendered by MathJax
myst_heading_anchors = 3                              # `[text](page.md#a-heading)` links resolve
nb_execution_mode = "off"                             # tools/build_docs.py executed the notebooks already
nb_merge_streams = True
suppress_warnings = ["myst.header"]                   # notebooks start at '#' and may skip a level in their sections
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_theme = "furo"
html_title = "ugttt"
html_static_path = ["_static"]
mathjax_path = "mathjax/tex-chtml.js"                 # served from the site: no CDN, so it works offline
html_show_sourcelink = False


def _plain_docstring(app, what, name, obj, options, lines):
    "Docstrings are plain one-line text, not reStructuredText: escape the characters RST would read as markup (|x|, *, `)."
    for i, line in enumerate(lines):
        lines[i] = line.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|").replace("`", "\\`")


def setup(app):
    app.connect("autodoc-process-docstring", _plain_docstring)
