"""A logical restore job's work: dump the source at S, reload it, swap names.

The journal and the lease belong to the job (``engine.restore.job``), which
calls these two steps between its state changes; what they do to the data
lives here, beside the dump and the reload. Each step is idempotent, so a
resumed job calls it again: a complete dump (its manifest written last) is
not dumped twice, and a tenant an earlier run swapped in is not loaded twice.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.logical.dump import Reader, dump_source
from engine.logical.manifest import MANIFEST, DumpManifest, read_manifest
from engine.logical.reload import reload_dump
from engine.pipeline import RestorePlan, SourceAtS
from tenants.catalog import Tx
from tenants.catalog.tenants import tenant_row
from tenants.store import TableStore
from tenants.tenancy import TenantRecord


def ensure_dump(store: TableStore, source: SourceAtS, root: str, *, reader: Reader) -> DumpManifest:
    """The dump of ``source`` under ``root`` in the warehouse, written unless a
    complete one is there already."""
    if not any(i.key == f"{root}/{MANIFEST}" for i in store.objects.list(f"{root}/")):
        dump_source(store, source, store.objects, root, reader=reader)
    return read_manifest(store.objects, root)


def reload_as_restore(
    store: TableStore,
    plan: RestorePlan,
    root: str,
    *,
    on_swap: Callable[[Tx], None],
    checkpoint: Callable[[], None],
) -> TenantRecord:
    """Load the dump at ``root`` as the plan's new tenant and swap names;
    ``on_swap`` runs in the swap's transaction (the job marks itself done
    there). Then the dump is deleted.

    A tenant that an earlier run swapped in, and whose job it could not mark
    done (it stopped between two transactions), is not loaded again:
    ``on_swap`` runs alone to finish the job.
    """
    tenant = _installed_by(store, plan)
    if tenant is None:
        tenant = reload_dump(
            store,
            store.objects,
            root,
            target_name=plan.target_name,
            replace_tenant_id=plan.replaced_tenant_id,
            staging_id=plan.new_tenant_id,
            job_id=plan.job_id,
            on_swap=on_swap,
            checkpoint=checkpoint,
            settings_from=plan,
        ).tenant
    else:
        with store.catalog.transaction() as tx:
            on_swap(tx)
    store.objects.delete_many(i.key for i in store.objects.list(f"{root}/"))
    return tenant


def _installed_by(store: TableStore, plan: RestorePlan) -> TenantRecord | None:
    with store.catalog.snapshot() as tx:
        row = tenant_row(tx, plan.new_tenant_id)
    if row is not None and row["state"] != "staging" and row["restore_job_id"] == plan.job_id:
        return TenantRecord.from_row(row)
    return None
