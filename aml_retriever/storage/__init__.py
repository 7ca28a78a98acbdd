"""Where bytes live: the catalog and one SQLite file per user (`store`), their schema and numbered
migrations (`migrations`), what the disk can refuse (`resources`), the audit log (`audit`),
copies of a live store (`backup`), which stored messages a read may see (`timeline`), and the
conversation links and segments written beside each message (`views`).

May import: `analysis`, `common`. Knows SQL; knows nothing of ranking, requests or transports.
"""
