"""Compiling agents into sealed, content-addressed prompt artifacts under ``compiled/``."""
