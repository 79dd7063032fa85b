"""A small seccomp filter for confined children: the system calls a sandboxed agent never needs.

Applied by the child itself (:mod:`assay.sandboxes._inside`) right before it
executes the agent's command, after Landlock; inherited by everything the
command starts. It refuses, with an error the program can handle:

* ``clone`` with ``CLONE_UNTRACED``: a child the tracer could not follow would
  hide its file accesses from the permission stage's trace (``EPERM``);
* ``clone3``: its flags sit in memory a filter cannot read, so it is refused
  with ``ENOSYS`` and the C library falls back to ``clone``, which is checked;
* the keyring calls (``keyctl``, ``add_key``, ``request_key``): the host
  session keyring must stay unreadable (``EPERM``);
* ``io_uring_*``, ``bpf``, ``perf_event_open``, ``userfaultfd``: kernel attack
  surface no task needs (``EPERM``);
* ``memfd_create``: a file in memory has no path Landlock could govern, so a
  program copied into one would run past the execute rights (``EPERM``);
* ``socket`` of any family but UNIX, IPv4, IPv6 and netlink (``EAFNOSUPPORT``):
  the box's network namespace holds no interface, but some families are not
  namespaced at all (``AF_VSOCK`` reaches the hypervisor of a virtual machine);
* on x86-64, the x32 system call table (``ENOSYS``), and any other
  architecture's calls (the process is killed).

The filter is a classic BPF program built here byte by byte; see
``seccomp(2)`` and ``linux/filter.h``.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

__all__ = [
    "SECCOMP_AVAILABLE",
    "apply_filter",
    "filter_program",
]

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian: an argument's low word first)
_CLONE_UNTRACED = 0x00800000
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_X32_SYSCALL_BIT = 0x40000000

# Per architecture: (AUDIT_ARCH value, syscall numbers).
_TABLES = {
    "x86_64": (
        0xC000003E,
        {
            "clone": 56,
            "clone3": 435,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "perf_event_open": 298,
            "bpf": 321,
            "userfaultfd": 323,
            "socket": 41,
            "memfd_create": 319,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "clone": 220,
            "clone3": 435,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "perf_event_open": 241,
            "bpf": 280,
            "userfaultfd": 282,
            "socket": 198,
            "memfd_create": 279,
        },
    ),
}
_REFUSED: tuple[str, ...] = (
    *("keyctl", "add_key", "request_key"),
    *("io_uring_setup", "io_uring_enter", "io_uring_register"),
    *("perf_event_open", "bpf", "userfaultfd"),
    "memfd_create",
)

#: Whether this machine's architecture has a filter (elsewhere the child refuses to run: see _inside).
SECCOMP_AVAILABLE = platform.machine() in _TABLES


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes:
    """The filter as ``struct sock_filter`` instructions for ``machine`` (default: this one)."""
    arch, numbers = _TABLES[machine or platform.machine()]
    program = [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ_K, 1, 0, arch),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _NR),
    ]
    if (machine or platform.machine()) == "x86_64":
        program += [_insn(_JGE_K, 0, 1, _X32_SYSCALL_BIT), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    program += [
        _insn(_JEQ_K, 0, 1, numbers["clone3"]),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    for name in _REFUSED:
        program += [_insn(_JEQ_K, 0, 1, numbers[name]), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    # socket: only the families a network namespace confines (its first argument is the family).
    allowed_families = (_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK)
    program += [
        _insn(_JEQ_K, 0, len(allowed_families) + 3, numbers["socket"]),
        _insn(_LD_W_ABS, 0, 0, _ARG0_LOW),
        *(_insn(_JEQ_K, len(allowed_families) - index, 0, family) for index, family in enumerate(allowed_families)),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    # clone: refuse CLONE_UNTRACED in its flags (the first argument).
    program += [
        _insn(_JEQ_K, 0, 4, numbers["clone"]),
        _insn(_LD_W_ABS, 0, 0, _ARG0_LOW),
        _insn(_JSET_K, 0, 1, _CLONE_UNTRACED),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply_filter() -> None:
    """Install the filter on this process (and everything it starts from now on); raises OSError on failure."""
    program = filter_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p).value)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
