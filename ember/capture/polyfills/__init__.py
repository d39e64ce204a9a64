"""Pure-Python equivalents of C library functions, inlined by the interpreter in their place (see
``itertools_.py``). They run as ordinary traced Python code, so their laziness and the order in
which they call back into the program follow the C implementation's documented behaviour."""
