"""Sections of ``normsat report``: one function per section, each in its own module."""
