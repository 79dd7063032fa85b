"""The permission stage: AuthBench-style file permission policies, scored and enforced.

Modules, each with one job:

* :mod:`.patterns` - what an absolute path pattern (``*``, ``**``, ``?``, ``[...]``) matches.
* :mod:`.scoring` - static precision, recall and F1 of a policy against a task's permission spec.
* :mod:`.model` - :class:`~assay.permissions.model.PermissionSet`, the read/write/execute triple.
* :mod:`.environment` - lay a case's ``environment`` down as the directory that becomes ``/``.
* :mod:`.jail` - run a command there, namespaced and Landlock-confined to a policy, and record denials.
* :mod:`.trace` - read ``strace`` output into accessed paths and denials.
"""
