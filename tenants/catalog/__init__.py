"""The catalog seam: a SQL database holding all metadata, one transaction per change."""

from tenants.catalog.base import Catalog, Row, Tx, open_catalog

__all__ = ["Catalog", "Row", "Tx", "open_catalog"]
