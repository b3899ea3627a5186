"""Sphinx configuration of the `limits` documentation.

Build (from the repository root): python -m pip install -e ".[docs]" && python -m sphinx -W -b html docs docs/_build/html

The CLI reference and the gallery are generated at build time by docs/_ext/limits_docs.py from
``limits.cli``'s argparse parser and from figures/*.json.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "_ext"))

import limits  # noqa: E402  (the checkout above, not an installed copy)

project = "limits"
author = "limits developers"
copyright = "2026, limits developers"
release = version = limits.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.viewcode", "numpydoc", "limits_docs"]
exclude_patterns = ["_build", "_ext", "README_measurements.md"]
source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
html_theme = "alabaster"
# wide enough for the code blocks (100 columns) and the generated tables
html_theme_options = {"page_width": "1240px", "sidebar_width": "230px", "body_max_width": "none", "code_font_size": "0.8em"}
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
nitpicky = False
