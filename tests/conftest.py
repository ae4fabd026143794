"""Suite-wide settings: hypothesis runs reproducibly (same examples every run, no timing deadline on a loaded 2-core machine)."""
from hypothesis import settings

settings.register_profile('ugttt', derandomize=True, deadline=None, database=None, print_blob=True)
settings.load_profile('ugttt')
