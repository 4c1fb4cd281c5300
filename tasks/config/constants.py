"""Names shared by the stages and the publisher, in a module that imports nothing.

Stage names and code versions are not here: ``tasks.graph`` declares the stages, and each stage's code
version derives from its source (``core.code_version``).
"""

SPLIT_NAMES = ("train", "validation", "test")  # split ids 0, 1, 2
