"""Tools for developing ``limits`` itself (import graph, architecture diagram); not used at run time."""
