"""Kernel-enforced file access for child processes: Linux Landlock, through raw syscalls.

:func:`restrict_self` confines the calling process (and everything it execs)
to the given read, write and execute paths; it is meant for a freshly
started child (the box helper, :mod:`assay.sandboxes._inside`), never for the engine
itself. If the kernel has no Landlock, :func:`abi_version` is 0 and
:func:`restrict_self` raises, so nothing ever runs unconfined by accident.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterable, Mapping

from ..errors import LandlockError

__all__ = ["LandlockError", "abi_version", "restrict_self", "restrict_self_to"]

# Syscall numbers: the generic table (x86_64 and aarch64 agree for these).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM, REFER, TRUNCATE, IOCTL_DEV = (1 << n for n in range(9, 16))
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
#: ABI 6 scopes: a confined process may not connect to abstract UNIX sockets, nor signal processes, outside its domain.
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_READ = READ_FILE | READ_DIR
_WRITE = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | MAKE_FIFO | MAKE_SOCK


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if platform.system() != "Linux":
        return 0
    result = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(result))


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM: ABI 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict_self(read: Iterable[str], write: Iterable[str], execute: Iterable[str], *, deny_tcp: bool = True) -> int:
    """Confine this process to the given paths; returns the ABI used. Raises LandlockError.

    ``read`` paths may be read (files and directory listings), ``write``
    paths read and changed (create, write, remove, truncate), ``execute``
    paths read and executed. With ``deny_tcp`` (ABI 4+) TCP bind and connect
    are refused too. Paths that do not exist are skipped.
    """
    abi = abi_version()
    extra_write = (TRUNCATE if abi >= 3 else 0) | (REFER if abi >= 2 else 0)
    grants: dict[str, int] = {}
    for path in read:
        grants[path] = grants.get(path, 0) | _READ
    for path in execute:
        grants[path] = grants.get(path, 0) | _READ | EXECUTE
    for path in write:
        grants[path] = grants.get(path, 0) | _READ | _WRITE | extra_write
    return restrict_self_to(grants, deny_tcp=deny_tcp)


def restrict_self_to(rules: Mapping[str, int], *, deny_tcp: bool = True, scope: bool = True) -> int:
    """Confine this process to exactly ``rules``: path -> access bits (``READ_FILE | EXECUTE``...).

    Every right this kernel can restrict is restricted; each rule grants its
    bits on the path and everything beneath it. Bits the kernel does not
    know are dropped, and on a file only the file rights are kept. Paths that
    do not exist are skipped. With ``deny_tcp`` (ABI 4+) TCP bind and connect
    are refused; with ``scope`` (ABI 6+) signals to, and abstract UNIX sockets
    of, processes outside this domain are refused too (on older kernels the
    PID and network namespaces of the box stand alone). Returns the ABI used;
    raises LandlockError (never leaves the process half-confined and running on).
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError("this kernel does not support Landlock; refusing to run code unconfined")
    libc = _libc()
    handled = _fs_rights(abi)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if deny_tcp and abi >= 4 else 0
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if scope and abi >= 6 else 0
    attr = _RulesetAttr(handled, net, scoped)
    # The kernel reads only the fields the ABI knows: 8 bytes before ABI 4, 16 before ABI 6.
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path, rights in rules.items():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= (
                        EXECUTE
                        | WRITE_FILE
                        | READ_FILE
                        | (TRUNCATE if abi >= 3 else 0)
                        | (IOCTL_DEV if abi >= 5 else 0)
                    )
                if not rights & handled:
                    continue  # e.g. only directory rights asked of a file
                rule = _PathBeneathAttr(rights & handled, fd)
                if (
                    libc.syscall(
                        _SYS_ADD_RULE,
                        ctypes.c_int(ruleset),
                        ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule),
                        ctypes.c_uint32(0),
                    )
                    < 0
                ):
                    raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi
