"""Test suite; a regular package so site-packages' stray `tests` packages never shadow it."""
