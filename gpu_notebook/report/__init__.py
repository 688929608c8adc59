"""Reports: build them from a Run, keep them for the session, compare them."""
