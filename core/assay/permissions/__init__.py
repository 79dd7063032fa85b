"""File permissions as the sandbox states and enforces them: patterns, permission sets, Landlock rules, traces.

The box (:mod:`assay.sandboxes.box`) confines a command to a permission set;
the permission design scores and enforces agents' policies with the same
language. Modules, each with one job:

* :mod:`.patterns` - what an absolute path pattern (``*``, ``**``, ``?``, ``[...]``) matches.
* :mod:`.model` - :class:`~assay.permissions.model.PermissionSet`, the read/write/execute triple.
* :mod:`.rules` - a permission set as Landlock rules.
* :mod:`.trace` - read ``strace`` output into accessed paths and denials.
"""
