"""Compilers from queries to execution plans, and the computations of their nodes."""
