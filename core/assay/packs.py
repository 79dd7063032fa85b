"""Case packs on disk: the manifest, the case files and the fixtures.

A pack is a directory::

    pack.yaml        the manifest (pack.json is accepted too)
    cases/           one case document per file (.yaml, .yml or .json)
    fixtures/        files that cases refer to (documents, pages, code trees)
    tasks/<name>/    one task per folder: its case document, case.yaml (or
                     case.yml, case.json), and beside it the files it refers
                     to (its workspace, say), which are fixtures

A pack may use either layout or both: the task folders are for hand-written
tasks a contributor edits in place, case file and workspace together.

The manifest lists every case and fixture file with its sha256 and size, and
the pack digest is sha256 over the canonical JSON of the manifest without its
``digest`` member. :func:`lock_manifest` (``assay pack lock``) writes those
lists and the digest; the validator recomputes them.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .case_index import ManifestParts, parts_of, read_manifest_parts
from .documents import YAML_SUFFIXES, DocumentError, SourceDocument, load_document, plain_data, top_level_string
from .errors import PackError
from .hashing import digest_document, file_entry

__all__ = [
    "CASE_SUFFIXES",
    "CaseDocuments",
    "MANIFEST_NAMES",
    "Pack",
    "TASK_CASE",
    "compute_digest",
    "find_manifest",
    "is_regular_below",
    "list_pack_files",
    "lock_manifest",
    "regular_files",
    "scan_pack",
]

MANIFEST_NAMES = ("pack.yaml", "pack.yml", "pack.json")
CASE_SUFFIXES = frozenset({".yaml", ".yml", ".json"})
_SKIP_DIRS = frozenset({".git", ".venv", "__pycache__", "build", "dist", "node_modules", ".pytest_cache"})


def find_manifest(root: Path) -> Path | None:
    """The manifest file directly inside ``root``, or None."""
    for name in MANIFEST_NAMES:
        candidate = root / name
        if candidate.is_file():
            return candidate
    return None


def _walk_files(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for filename in sorted(filenames):
            yield Path(dirpath) / filename


def _scan(root: Path, skip: frozenset[str] | set[str] = frozenset()) -> Iterator[tuple[str, bool]]:
    """Every non-directory entry below ``root`` as (POSIX path, is a regular file), never following links.

    Folders named in ``skip`` are not entered; unreadable folders are passed over.
    """
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:  # read as it goes: a folder of a generated pack may hold hundreds of thousands of cases
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip:
                        stack.append((Path(entry.path), f"{prefix}{entry.name}/"))
                else:
                    yield prefix + entry.name, entry.is_file(follow_symlinks=False)


def regular_files(root: Path) -> set[str]:
    """POSIX paths of every regular file below ``root``, never following links."""
    return {path for path, regular in _scan(root) if regular}


def is_regular_below(root: Path, relative: Any) -> bool:
    """True when ``relative`` is the POSIX path of a regular file below ``root`` reached through real folders (no
    link followed, no ``.``, ``..`` or empty part): exactly when it is in :func:`regular_files`, one path at a
    time instead of a set of every file."""
    if not isinstance(relative, str) or not relative:
        return False
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return False
    import stat

    here = root
    try:
        for depth, part in enumerate(parts, start=1):
            here = here / part
            mode = os.lstat(here).st_mode
            if not (stat.S_ISREG(mode) if depth == len(parts) else stat.S_ISDIR(mode)):
                return False
    except (OSError, ValueError):
        return False
    return True


def irregular_entries(root: Path) -> list[str]:
    """POSIX paths of the links and special files below ``root``, sorted (a pack holds none)."""
    return sorted(path for path, regular in _scan(root, _SKIP_DIRS) if not regular)


#: The name of the case document in a task folder (``tasks/<name>/case.yaml``), with any of CASE_SUFFIXES.
TASK_CASE = "case"


def _is_task_case(root: Path, path: Path) -> bool:
    """True for ``tasks/<name>/case.<suffix>``: a task's case document, not one of its files."""
    parts = path.relative_to(root).parts
    return len(parts) == 3 and path.stem == TASK_CASE and path.suffix.lower() in CASE_SUFFIXES


def list_pack_files(root: Path) -> tuple[list[Path], list[Path]]:
    """The case files and fixture files present on disk, sorted by POSIX path."""
    cases = [p for p in _walk_files(root / "cases") if p.suffix.lower() in CASE_SUFFIXES]
    fixtures = list(_walk_files(root / "fixtures"))
    for path in _walk_files(root / "tasks"):
        (cases if _is_task_case(root, path) else fixtures).append(path)
    key = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    return sorted(cases, key=key), sorted(fixtures, key=key)


def _case_entry(root: Path, path: Path) -> dict[str, Any]:
    shown = str(path)
    try:
        data = load_document(path).data
    except DocumentError as exc:
        where = f"{shown}:{exc.line}" if exc.line else shown
        raise PackError(f"{where}: {exc.message}") from None
    except OSError as exc:
        raise PackError(f"{shown}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("family"), str):
        raise PackError(f"{path}: a case needs a string 'id' and 'family'")
    return {"id": data["id"], "family": data["family"], **file_entry(root, path)}


def scan_pack(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Manifest entries for the case and fixture files on disk (cases are parsed for id and family)."""
    cases, fixtures = list_pack_files(root)
    return [_case_entry(root, p) for p in cases], [file_entry(root, p) for p in fixtures]


def compute_digest(manifest: dict[str, Any]) -> str:
    """The pack digest of a manifest: canonical JSON without ``digest``, then sha256."""
    return digest_document({k: v for k, v in manifest.items() if k != "digest"})


class _CaseView(Mapping[str, Any]):
    """One case document, read from its file the first time a member other than ``family`` is asked for."""

    __slots__ = ("_data", "_entry", "_root")

    def __init__(self, root: Path, entry: Mapping[str, Any]) -> None:
        # The path is joined only when the document is read: most views are asked only their family, a million times.
        self._root, self._entry = root, entry
        self._data: Mapping[str, Any] | None = None

    def _document(self) -> Mapping[str, Any]:
        if self._data is None:
            path = self._root / str(self._entry.get("path", ""))
            data = load_document(path).data
            if not isinstance(data, dict):
                raise PackError(f"{path}: a case document must be a mapping")
            self._data = data
        return self._data

    def __getitem__(self, key: str) -> Any:
        if key == "family" and self._data is None and "family" in self._entry:
            return self._entry["family"]  # the manifest lists it; the pack's digest covers both
        return self._document()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._document())

    def __len__(self) -> int:
        return len(self._document())


#: Case views a :class:`CaseDocuments` keeps at most.
_VIEWS_KEPT = 4096


#: Manifests read in parts, shared by the packs of one directory while any of them holds them (a run and its own
#: validation read one pack).
_PARTS: weakref.WeakValueDictionary[tuple[Any, ...], ManifestParts] = weakref.WeakValueDictionary()


class CaseDocuments(Mapping[str, Mapping[str, Any]]):
    """A pack's cases by id, each a :class:`_CaseView` (read lazily, once)."""

    def __init__(self, root: Path, index: Mapping[str, Mapping[str, Any]]) -> None:
        self._root, self._index = root, index
        self._views: dict[str, _CaseView] = {}

    def __getitem__(self, case_id: str) -> Mapping[str, Any]:
        view = self._views.get(case_id)
        if view is None:
            entry = self._index[case_id]
            if len(self._views) >= _VIEWS_KEPT:
                # Bounded: a summary of a pack of a million cases reads them case by case, and a view holds its
                # parsed document once a member other than the family was asked of it.
                self._views.clear()
            view = self._views[case_id] = _CaseView(self._root, entry)
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


@dataclass(frozen=True)
class Pack:
    """A case pack registered by a plugin, read lazily from its directory."""

    root: Path

    @classmethod
    def from_directory(cls, root: os.PathLike[str] | str) -> Pack:
        """A pack rooted at ``root`` (a directory holding ``pack.yaml``); nothing is read yet."""
        return cls(Path(root))

    @functools.cached_property
    def manifest_path(self) -> Path:
        """The manifest file; raises PackError when there is none."""
        found = find_manifest(self.root)
        if found is None:
            raise PackError(f"{self.root}: no pack manifest ({' or '.join(MANIFEST_NAMES)})")
        return found

    @functools.cached_property
    def manifest_document(self) -> SourceDocument:
        """The parsed manifest with source lines; raises PackError when unreadable."""
        try:
            return load_document(self.manifest_path)
        except (DocumentError, OSError) as exc:
            raise PackError(f"{self.manifest_path}: {exc}") from None

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest as plain data."""
        data = self.manifest_document.data
        if not isinstance(data, dict):
            raise PackError(f"{self.manifest_path}: the manifest is not a mapping")
        return data

    @property
    def name(self) -> str:
        """The pack name from the manifest.

        A pack whose manifest cannot be read is still registered, under a name
        that says so, so one broken pack never stops the whole CLI; using it
        (listing, validating, running) reports the real error.
        """
        if "manifest_document" not in self.__dict__:
            # Registering a pack needs only its name: read it without loading the whole manifest.
            try:
                fast = top_level_string(self.manifest_path, "name")
            except PackError:
                fast = None
            if fast is not None:
                return fast
        try:
            return str(self.parts.members.get("name", self.root.name))
        except PackError:
            return f"unreadable:{self.root}"

    @functools.cached_property
    def parts(self) -> ManifestParts:
        """The manifest's members and its case list held compactly (see :mod:`assay.case_index`): what running,
        validating a bundle and reporting need, without the whole manifest in memory. Raises PackError when the
        manifest cannot be read."""
        if "manifest_document" in self.__dict__ or self.manifest_path.suffix.lower() in YAML_SUFFIXES:
            return parts_of(self.manifest)
        try:
            stat = self.manifest_path.stat()
            key = (str(self.manifest_path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
            found = _PARTS.get(key)
            if found is None:
                found = _PARTS[key] = read_manifest_parts(self.manifest_path)
            return found
        except (DocumentError, OSError):
            return parts_of(self.manifest)  # read whole: it says what is wrong

    @property
    def version(self) -> str:
        """The pack version from the manifest."""
        return str(self.parts.members.get("version", ""))

    @property
    def claimed_digest(self) -> str | None:
        """The digest the manifest states."""
        value = self.parts.members.get("digest")
        return value if isinstance(value, str) else None

    def computed_digest(self) -> str:
        """The digest recomputed from the files on disk (not from the manifest's claims)."""
        manifest = dict(self.manifest)
        manifest["cases"], manifest["fixtures"] = scan_pack(self.root)
        return compute_digest(manifest)

    def case_index(self) -> Mapping[str, Mapping[str, Any]]:
        """Case id to its manifest entry (id, family, path, sha256, size), without parsing case files (held
        compactly: see :class:`assay.case_index.CaseIndex`)."""
        return self.parts.cases

    def cases_by_id(self) -> CaseDocuments:
        """Case id to its case document, each read from its file only when a member other than ``family`` is
        asked for (the family comes from the manifest): what metrics see as ``MetricContext.cases``."""
        return CaseDocuments(self.root, self.case_index())

    def integrity_problem(self) -> str | None:
        """Why this pack's files do not match its manifest, or None (hashes only, no parsing)."""
        import itertools

        from .hashing import digest_file

        parts = self.parts
        try:
            if parts.digest() != parts.members.get("digest"):
                return "its manifest digest does not match its contents"
        except (DocumentError, ValueError, RecursionError) as exc:  # rfc8785 refuses some values: a broken manifest
            return f"its manifest cannot be hashed ({exc})"
        on_disk = 0  # the files the digest must cover: a file added beside the listed ones is not in it
        for folder in ("cases", "fixtures", "tasks"):
            irregular = []
            for path, regular in _scan(self.root / folder, _SKIP_DIRS):
                if not regular:
                    irregular.append(path)
                elif folder != "cases" or Path(path).suffix.lower() in CASE_SUFFIXES:
                    on_disk += 1
            if irregular:
                return f"{folder}/{sorted(irregular)[0]} is a link or special file (packs hold none)"
        fixtures = parts.members.get("fixtures", [])
        listed = len(parts.cases) + (len(fixtures) if isinstance(fixtures, list) else 0)
        if on_disk != listed:
            return f"it holds {on_disk} case and fixture files, and its manifest lists {listed}"
        for entry in itertools.chain(parts.cases.entries(), fixtures if isinstance(fixtures, list) else []):
            if not isinstance(entry, dict) or not is_regular_below(self.root, entry.get("path")):
                return f"{entry.get('path') if isinstance(entry, dict) else entry} is missing"
            if digest_file(self.root / entry["path"])[0] != entry.get("sha256"):
                return f"{entry['path']} does not match its manifest"
        return None

    def case_documents(self) -> Iterator[SourceDocument]:
        """Every case document listed in the manifest, parsed (raises PackError on the first unreadable one)."""
        for entry in self.manifest.get("cases", []):
            path = self.root / entry["path"]
            try:
                yield load_document(path)
            except (DocumentError, OSError) as exc:
                raise PackError(f"{path}: {exc}") from None

    def cases(self) -> dict[str, dict[str, Any]]:
        """Case id to case data for every listed case."""
        return {doc.data["id"]: doc.data for doc in self.case_documents() if isinstance(doc.data, dict)}


def lock_manifest(root: Path) -> str:
    """Rewrite the manifest's ``cases``, ``fixtures`` and ``digest`` from the files on disk.

    Comments and key order of a YAML manifest survive (ruamel round trip); the
    write is atomic. Returns the new digest.
    """
    from ruamel.yaml import YAML

    manifest_path = find_manifest(root)
    if manifest_path is None:
        raise PackError(f"{root}: no pack manifest ({' or '.join(MANIFEST_NAMES)})")
    case_entries, fixture_entries = scan_pack(root)
    is_yaml = manifest_path.suffix != ".json"
    if is_yaml:
        yaml = YAML(typ="rt")
        yaml.width = 4096
        yaml.indent(mapping=2, sequence=4, offset=2)
        document = yaml.load(manifest_path.read_text(encoding="utf-8"))
    else:
        document = json.loads(manifest_path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise PackError(f"{manifest_path}: the manifest is not a mapping")
    document["cases"] = case_entries
    document["fixtures"] = fixture_entries
    # Hash exactly what a reader will parse, so lock and validate always agree.
    digest = compute_digest(plain_data(document))
    document["digest"] = digest
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".pack.", suffix=manifest_path.suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if is_yaml:
                yaml.dump(document, handle)
            else:
                json.dump(document, handle, indent=2, ensure_ascii=False)
                handle.write("\n")
        os.chmod(tmp, manifest_path.stat().st_mode & 0o7777)  # mkstemp makes 0600; keep the author's mode
        os.replace(tmp, manifest_path)
    except BaseException:
        os.unlink(tmp)
        raise
    return digest
