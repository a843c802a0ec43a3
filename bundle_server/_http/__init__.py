"""The HTTP core: the WSGI app, routing, request parsing, the guard, response checks, the shell."""
