"""Sandboxes: the isolated stores and the code runner that exec-stage tool calls act on.

The built-in ``local`` sandbox lays down one fresh set of stores per work
item: a directory tree (files), a mailbox on disk (email), SQLite (database),
a JSON file (memory, persistent across a case's sessions), pages served by a
real HTTP server on loopback (web), and code run in a child process with no
network, time and memory limits, and file access confined by Landlock.
"""
