"""Sphinx configuration of the `limits` documentation (build: python -m sphinx -b html docs /tmp/docs_html -W)."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "limits"
author = "limits developers"
copyright = "2026, limits developers"
release = "0.1.0"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.viewcode", "numpydoc"]
exclude_patterns = ["_build", "README_measurements.md"]
source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
html_theme = "alabaster"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
nitpicky = False
