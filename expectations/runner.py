"""Run expectation suites on Dask partitions: prepflow's generated suites on its own kernels; of a user
suite, every expectation with a kernel (``kernels.user_kernel``: the common types, with the kwargs a
kernel takes) on the kernels too, and only the others through Great Expectations' public API
(``expectations.gx_suites``), on the columns they name.

One Dask task per partition computes every suite's per-partition part (the kernels' partials and
GX's row-wise results); a user suite with expectations that need the whole table adds one task over
all partitions. The partitions' parts are gathered by a tree of Dask tasks (``core.task_tree``),
so that this process receives one value whatever the number of partitions; on the way, a kernel that
``combines`` (the uniqueness of dense integer keys: the encoded gate's ``__row__``) merges its partials
there, on the workers, and only a summary reaches this process (``unique_kernel.ValuesToBeUnique``: the
counts, and the keys found twice, whose rows the partitions then flag on the workers). The merge runs
where ``run`` is called and handles small values only (counts, the first unexpected values, sorted keys
for uniqueness). GX is imported only when a user suite has expectations without a kernel: a run with the
generated suites alone, or with user suites the kernels cover, never imports it.

Partitions must carry a global index (row numbers), so that unexpected indices are those of the
whole table, and come in row order. ``run``'s ``order`` only changes which partitions the tree gathers
together (those whose keys overlap, for the combining kernels); results are merged in partition order.

File by file (a dataset of several files, ``tasks.validate.raw_files``): ``file_bundle`` scans one file's
partitions as ``run`` does and gathers them into one bundle, which a cache entry keeps (``storage.accumulators``:
JSON and ``.npy``, no pickle); ``run_files`` merges the files' bundles into the suite entries ``run`` gives for
the whole table. A suite can (``portable``) when every expectation runs on a kernel whose partials an entry
keeps (``Kernel.per_file``): the counts, the first unexpected values and their input rows of the row-wise
checks, non-null counts, distinct values, an aggregate's numeric column. Not uniqueness (pandas indexes and
values, Arrow arrays; its merge may read the partitions again) nor an expectation only GX runs. The results
are the same because a kernel's merge does not depend on where the rows are cut, as long as the partials come
in row order with the rows' global numbers: a file's bundle is made with its rows' numbers in the dataset,
and ``run_files`` takes every file's partitions, in file order, as the partitions of one run.
"""

from __future__ import annotations

import dask
import numpy as np

from core.lazy import pandas as pd
from core.task_fusion import fused
from core.task_tree import tree
from expectations import gx_suites, kernel_base, kernels, results
from expectations.suites import is_generated
from storage.accumulators import Unstorable

# a dispatcher to the kernels: the gates that import it are versioned with the kernels too (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True


def _partition(frame: pd.DataFrame, checks: list, plans: list, index: int) -> dict:
    """Partition ``index``'s part, as a bundle of one (``_gather``): its kernels' partials and GX's
    row-wise results, except the partials of kernels that combine, which start their combined state."""
    scanned = [kernels.scan(c, frame) for c in checks]
    combined = {}
    for k, group in enumerate(checks):
        for j, check in enumerate(group):
            if check.combines:
                combined[k, j] = check.leaf(scanned[k][j], index)
                scanned[k][j] = None
    return {"parts": [(index, scanned, gx_suites.scan(plans, frame, index == 0) if plans else [])],
            "combined": combined}


def _gather(checks: list, *bundles: dict) -> dict:
    """Bundles of partitions as one: their parts listed, each combining kernel's states combined."""
    return {"parts": [part for b in bundles for part in b["parts"]],
            "combined": {key: checks[key[0]][key[1]].combine(*(b["combined"][key] for b in bundles))
                         for key in bundles[0]["combined"]}}


def _flag(flags: list, frame: pd.DataFrame) -> list[dict]:
    """One partition's rows holding a repeated key, per ``(group, position, kernel, Flag)`` of ``flags``."""
    return [check.flag(frame, flag.keys) for _k, _j, check, flag in flags]


def _finish(checks: list, bundle: dict) -> dict:
    """The gathered bundle as this process receives it: each combining kernel's state reduced to the
    partials its merge takes (``Kernel.finish``), the parts in partition order."""
    return {"parts": sorted(bundle["parts"], key=lambda part: part[0]),
            "combined": {key: checks[key[0]][key[1]].finish(state) for key, state in bundle["combined"].items()}}


def split_user_suite(suite: dict, columns: list[str]) -> tuple[list, dict]:
    """``([(position, kernel)], GX's part)``: the expectations of a user suite that run on kernels, and
    the suite holding the others (in suite order), which GX runs."""
    kernel_run, rest = [], []
    for i, exp in enumerate(suite["expectations"]):
        kernel = kernels.user_kernel(exp, columns)
        if kernel is None:
            rest.append(exp)
        else:
            kernel_run.append((i, kernel))
    return kernel_run, {**suite, "expectations": rest}


def needs_gx(suite: dict, columns: list[str] | None = None) -> bool:
    """Whether a user suite has an expectation that only GX runs (``columns`` unknown: none missing)."""
    return any(kernels.user_kernel(e, columns or []) is None for e in suite["expectations"])


def _plan(named: list[tuple[str, dict]], columns: list[str]) -> tuple[list, list]:
    """``(groups, user)``: per suite, ``(suite index, positions or None: all, kernels)``; and the parts of user
    suites that GX runs, ``(suite index, suite)``."""
    groups: list[tuple[int, list[int] | None, list]] = []
    user: list[tuple[int, dict]] = []
    for i, (_src, s) in enumerate(named):
        if is_generated(s):
            groups.append((i, None, kernels.kernels(s, columns)))
        elif s["expectations"]:
            kernel_run, rest = split_user_suite(s, columns)
            groups.append((i, [k for k, _c in kernel_run], [c for _k, c in kernel_run]))
            if rest["expectations"]:
                user.append((i, rest))
    return groups, user


def columns_read(named: list[tuple[str, dict]], columns: list[str]) -> list[str] | None:
    """The columns whose values the suites read, in ``columns`` order: every kernel reads its ``column`` but
    the existence check, which reads the names only, and the row counts; None (all of them) when GX runs
    an expectation."""
    groups, user = _plan(named, columns)
    if user:
        return None
    read = {c.column for _i, _pos, group in groups for c in group
            if c.column is not None and not isinstance(c, kernels.ColumnToExist)}
    return [c for c in columns if c in read]


def run(named: list[tuple[str, dict]], parts: list, columns: list[str], scheduler=None,
        order: list[int] | None = None) -> list[dict]:
    """Run ``(source, suite JSON)`` pairs on ``parts`` (pandas frames or Dask delayed frames, in row
    order, with a global index) whose columns are ``columns``: one suite entry each
    (``expectations.results.suite_entry``). ``scheduler``: Dask's (default: the active one). ``order``:
    the partitions in the order the gathering tree takes them (default: theirs), so that partitions whose
    keys overlap meet early (see the module's doc)."""
    groups, user = _plan(named, columns)
    plans = []
    if user:  # GX is imported (by gx_suites, on first use) only for these
        plans = [gx_suites.Plan(s, columns) for _i, s in user]
    checks = [c for _i, _pos, c in groups]
    if not parts:
        parts, order = [pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})], None
    # the checks and plans once, as opaque values: Dask walks a list argument in every call
    c, pl = dask.delayed(checks, traverse=False), dask.delayed(plans, traverse=False)
    tasks = [dask.delayed(_partition)(p, c, pl, i) for i, p in enumerate(parts)]
    order = list(range(len(parts))) if order is None else list(order)
    if sorted(order) != list(range(len(parts))):
        raise ValueError(f"order must list each of the {len(parts)} partitions once, got {order}")
    wanted = [dask.delayed(_finish)(c, tree([tasks[i] for i in order], _gather, c))]
    if any(plan.whole for plan in plans):
        wanted.append(dask.delayed(gx_suites.whole)(plans, *parts))
    with fused():  # each partition's read runs inside its task (core.task_fusion)
        computed = list(dask.compute(*wanted, scheduler=scheduler)) if any(checks) or plans else []
    bundle = computed[0] if computed else {"parts": [], "combined": {}}
    whole = computed[1] if len(computed) > 1 else [[] for _ in plans]
    return merged(named, groups, user, plans, bundle, whole, parts, scheduler)


def merged(named: list[tuple[str, dict]], groups: list, user: list, plans: list, bundle: dict, whole: list,
           parts: list, scheduler=None) -> list[dict]:
    """``run``'s suite entries from the finished bundle (``_finish``) of ``_plan``'s ``groups`` and ``user``
    parts (GX's ``plans`` and its ``whole``-table results); ``parts``, the partitions, are read again only
    when a kernel's merge asks (a repeated key to flag, a rescan)."""
    scanned = [(s, gx) for _i, s, gx in bundle["parts"]]
    out: list[list] = [[None] * len(s["expectations"]) for _src, s in named]
    rescan: list[tuple[int, int, kernel_base.Kernel]] = []  # (group, position in it, kernel) whose merge asked
    flags: list[tuple[int, int, kernel_base.Kernel, kernel_base.Flag]] = []  # the same, with the repeated keys found
    for k, (i, positions, group) in enumerate(groups):
        for j, check in enumerate(group):
            partials = bundle["combined"][k, j] if (k, j) in bundle["combined"] else [s[0][k][j] for s in scanned]
            r = check.merge(partials)
            if r is kernel_base.RESCAN:
                rescan.append((k, j, check))
            elif isinstance(r, kernel_base.Flag):
                flags.append((k, j, check, r))
            out[i][positions[j] if positions is not None else j] = r
    if flags:  # repeated keys found on the workers: each partition flags its rows holding one
        with fused():
            flagged = list(dask.compute(*[dask.delayed(_flag)(dask.delayed(flags, traverse=False), p) for p in parts],
                                        scheduler=scheduler))
        for n, (k, j, check, flag) in enumerate(flags):
            i, positions = groups[k][0], groups[k][1]
            out[i][positions[j] if positions is not None else j] = check.merge_flagged(flag, [f[n] for f in flagged])
    if rescan:  # exact partials for these kernels only (a uniqueness check that found a repeat, say)
        for _k, _j, check in rescan:
            check.exact = True
        with fused():
            again = list(dask.compute(*[dask.delayed(kernels.scan)([c for _k, _j, c in rescan], p) for p in parts],
                                      scheduler=scheduler))
        for n, (k, j, check) in enumerate(rescan):
            i, positions = groups[k][0], groups[k][1]
            out[i][positions[j] if positions is not None else j] = check.merge([a[n] for a in again])
    for k, (i, _rest) in enumerate(user):
        gx_out = iter(gx_suites.merge(plans[k], [s[1][k] for s in scanned], whole[k]))
        out[i] = [r if r is not None else next(gx_out) for r in out[i]]
    return [results.suite_entry(s["name"], src, out[i]) for i, (src, s) in enumerate(named)]


# ---- file by file --------------------------------------------------------------------------------

def portable(suite: dict, columns: list[str], dtypes: dict[str, str]) -> bool:
    """Whether ``suite`` can run file by file: every expectation on a kernel whose partials an entry keeps."""
    if is_generated(suite):
        found = kernels.kernels(suite, columns)
    else:
        kernel_run, rest = split_user_suite(suite, columns)
        if rest["expectations"]:
            return False
        found = [k for _i, k in kernel_run]
    return all(k.per_file(dtypes) for k in found)


def file_bundle(named: list[tuple[str, dict]], parts: list, columns: list[str]):
    """One file's bundle, delayed: its partitions' (``parts``: delayed frames in row order, indexed by input
    row) partials, scanned and gathered on the workers as ``run`` does, as the value an entry keeps."""
    groups, user = _plan(named, columns)
    if user:
        raise ValueError("a suite with expectations only GX runs cannot run file by file")
    c = dask.delayed([checks for _i, _pos, checks in groups], traverse=False)
    gathered = tree([dask.delayed(_partition)(p, c, [], i) for i, p in enumerate(parts)], _gather, c)
    return dask.delayed(_stored)(gathered)


def run_files(named: list[tuple[str, dict]], bundles: list, columns: list[str]) -> list[dict]:
    """One suite entry per suite (``run``'s) from the files' bundles (``file_bundle``), in file order."""
    groups, user = _plan(named, columns)
    scanned = [[[_value(t) for t in group] for group in part] for b in bundles for part in b["parts"]]
    bundle = {"parts": [(n, s, []) for n, s in enumerate(scanned)], "combined": {}}
    return merged(named, groups, user, [], bundle, [], [])


def _stored(bundle: dict | None) -> dict:
    """A file's gathered bundle as an entry keeps it: per partition (in row order), per suite, per kernel,
    ``[kind, value]``: ``value`` the partial, ``error`` a ``KernelError``'s message, ``column`` an
    aggregate's numeric column as a numpy array; ``Unstorable`` for any other column (and ``accumulators.dump``
    for a value it cannot write: a timestamp among the first unexpected values of a DataFrame's column, say)."""
    bundle = bundle or {"parts": [], "combined": {}}
    if bundle["combined"]:
        raise Unstorable("a kernel that combines on the workers (uniqueness) cannot run file by file")
    return {"parts": [[[_tagged(p) for p in group] for group in scanned]
                      for _i, scanned, _gx in sorted(bundle["parts"], key=lambda part: part[0])]}


def _tagged(partial) -> list:
    if isinstance(partial, kernel_base.KernelError):
        return ["error", str(partial)]
    if isinstance(partial, pd.Series):
        if not (isinstance(partial.dtype, np.dtype) and partial.dtype.kind in "biuf"):
            raise Unstorable(f"cannot store a column of dtype {partial.dtype} without pickle")
        return ["column", partial.to_numpy()]
    return ["value", partial]


def _value(tagged: list):
    kind, value = tagged
    if kind == "error":
        return kernel_base.KernelError(value)
    if kind == "column":
        return pd.Series(value)
    return value
